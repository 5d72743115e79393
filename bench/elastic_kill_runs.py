#!/usr/bin/env python3
"""Randomized elastic failure runs: N jobs of the elastic torch test worker
(test/python/elastic/train_elastic.py) at -np 4 --min-np 3, committing every few steps; in each,
one rank chosen at random fails at a random step. Each run must finish every step at size 3
with equal parameters on every rank after each reset (the worker allgathers a checksum), resume
from its last commit (no committed step lost or repeated) and end with equal parameters. Prints
one line per run (what failed, where, recovery time from the failure to the first step at size
3) and the median and worst recovery, or the runs that failed or hung.

  python3 bench/elastic_kill_runs.py --build build --runs 20 --seed 1
  sudo python3 bench/elastic_kill_runs.py --build build --runs 20 --seed 1 --cluster 4

Without --cluster the four ranks run on this host and the failure is a SIGKILL. With --cluster
H (root) they run on H namespace hosts of test/cluster/cluster.sh, one rank each, and the failure
is either a SIGKILL or the rank's host dropping off the network (its link shaped to 100% loss,
both ways) at random: a worker cut off is found unresponsive by its peers after the collective
timeout (--gloo-timeout-seconds) and ended by the launcher. The ranks share this machine's cores,
which shows in the recovery times on a small machine.
"""
import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = os.path.join(ROOT, "test", "python", "elastic", "train_elastic.py")
sys.path.insert(0, os.path.join(ROOT, "test", "cluster"))
sys.path.insert(0, os.path.join(ROOT, "bench", "suite"))
from cluster import Cluster  # noqa: E402
from common import torch_worker_env  # noqa: E402

STEPS = 40
COMMIT_EVERY = 3


def events_by_worker(out):
    """Each worker's lines ([i]<stdout>:...), in order, by start index."""
    lines = {}
    for m in re.finditer(r"^\[(\d+)\]<stdout>:(.*)$", out, re.M):
        lines.setdefault(int(m.group(1)), []).append(m.group(2))
    return lines


def check_resumed(out):
    """'' when every survivor resumed at size 3 from its last commit and every sync left the
    ranks equal; else what went wrong."""
    if re.search(r"SYNCED SIZE \d+ STEP \d+ EQUAL False", out):
        return "parameters differ after a reset"
    for worker, lines in events_by_worker(out).items():
        last_commit, size = 0, 4
        for line in lines:
            c = re.match(r"COMMIT (\d+)", line)
            s = re.match(r"STEP (\d+) SIZE (\d+)", line)
            if c and size == 4:
                last_commit = int(c.group(1))
            elif s and int(s.group(2)) == 3 and size == 4:
                size = 3
                if int(s.group(1)) != last_commit + 1:
                    return "worker %d resumed at step %s after its commit of step %d" % (
                        worker, s.group(1), last_commit)
    return ""


def launch(binary, env, flags, timeout, on_line):
    """Runs the job, calling on_line(line) for each line of its stdout; (returncode or None when
    it hung, stdout, stderr)."""
    p = subprocess.Popen([binary, "run"] + flags + [sys.executable, WORKER], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err = []
    reader = threading.Thread(target=lambda: err.append(p.stderr.read()), daemon=True)
    reader.start()
    out = []
    hung = []

    def stop():  # SIGTERM lets the launcher end its workers
        hung.append(True)
        p.terminate()
        time.sleep(15)
        p.kill()

    timer = threading.Timer(timeout, stop)
    timer.start()
    for line in p.stdout:
        out.append(line)
        on_line(line)
    code = p.wait()
    timer.cancel()
    reader.join()
    return (None if hung else code), "".join(out), "".join(err)


def one_run(binary, env, cluster, rank, step, drop, timeout):
    env = dict(env, ELASTIC_TEST_KILL_SIZE="4", ELASTIC_TEST_KILL_RANK=str(rank),
               ELASTIC_TEST_STEPS=str(STEPS), ELASTIC_TEST_COMMIT_EVERY=str(COMMIT_EVERY))
    env["ELASTIC_TEST_DROP_AT" if drop else "ELASTIC_TEST_KILL_AT"] = str(step)
    flags = ["-np", "4", "--min-np", "3", "--elastic-timeout", "30"]
    failed_at = []
    cut = []

    def on_line(line):
        killed = re.search(r"KILLED AT ([\d.]+)", line)
        if killed:
            failed_at.append(float(killed.group(1)))
        if drop and "DROP LINK AT" in line and not cut:
            host = cluster.hosts[rank]  # one slot per host, ranks in host order at the start
            cluster.shape(host, "100%")
            failed_at.append(time.time())
            cut.append(host)

    if cluster:
        flags += cluster.flags() + ["--gloo-timeout-seconds", "3"]
    else:  # one host: the failed worker's slot leaves, not the whole host (Horovod's default)
        flags += ["--blacklist-scope", "slot"]
    try:
        code, out, err = launch(binary, env, flags, timeout, on_line)
    finally:
        for host in cut:
            cluster.shape(host, "0")
    if code is None:
        return "hang", None
    done = re.findall(r"DONE STEP (\d+) SIZE (\d+) RANK (\d+) EQUAL (\w+)", out)
    ok = (code == 0 and sorted(int(r) for _, _, r, _ in done) == [0, 1, 2] and
          all(int(s) == STEPS and int(z) == 3 and e == "True" for s, z, _, e in done))
    if not ok or not failed_at:
        return "failed (exit %d): %s" % (code, err[-600:]), None
    wrong = check_resumed(out)
    if wrong:
        return "failed: " + wrong, None
    firsts = [float(t) for z, t in re.findall(r"STEP \d+ SIZE (\d+) AT ([\d.]+)", out)
              if int(z) == 3 and float(t) > failed_at[0]]
    return "ok", min(firsts) - failed_at[0]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 1)[1])
    p.add_argument("--build", default="build")
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout", type=float, default=180)
    p.add_argument("--cluster", type=int, default=0, metavar="HOSTS",
                   help="run on this many namespace hosts (4), killing or cutting one off")
    p.add_argument("--rate", default="1gbit", help="the cluster's link rate")
    a = p.parse_args()
    binary = os.path.join(os.path.abspath(a.build), "bin", "hvdsparse")
    env = torch_worker_env(a.build)
    cluster = Cluster(a.cluster, a.rate, tag="hek") if a.cluster else None
    rng = random.Random(a.seed)
    recoveries, bad = {"kill": [], "drop": []}, []
    try:
        for i in range(a.runs):
            rank, step = rng.randrange(4), rng.randrange(2, STEPS - 5)
            drop = bool(cluster) and rng.random() < 0.5
            what = "link of rank %d dropped" % rank if drop else "rank %d killed" % rank
            start = time.time()
            status, rec = one_run(binary, env, cluster, rank, step, drop, a.timeout)
            print("run %2d: %s at step %2d: %s%s (job %.1f s)" % (
                i + 1, what, step, status, "" if rec is None else ", recovery %.3f s" % rec,
                time.time() - start), flush=True)
            if rec is None:
                bad.append((i + 1, status))
            else:
                recoveries["drop" if drop else "kill"].append(rec)
    finally:
        if cluster:
            cluster.down()
    every = recoveries["kill"] + recoveries["drop"]
    print("%d runs: %d finished, %d failed or hung" % (a.runs, len(every), len(bad)))
    for name, recs in [("all", every)] + list(recoveries.items()) * bool(cluster):
        if recs:
            print("recovery (%s, %d runs): median %.3f s, worst %.3f s, best %.3f s" % (
                name, len(recs), statistics.median(recs), max(recs), min(recs)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
