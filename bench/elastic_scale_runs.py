#!/usr/bin/env python3
"""Elastic scale up and down on the namespace cluster (test/cluster/cluster.sh, root): N jobs of
the elastic torch test worker (test/python/elastic/train_elastic.py) on 4 of 5 hosts, one slot
each, with a discovery script that prints a hosts file. In each job rank 0 adds the fifth host
to the file at step 5 (the job grows to 5: the new worker receives the state by sync()), then at
step 30 removes one of the first four (the job shrinks to 4 without an error). Every job must
finish all steps at size 4 with equal parameters on every rank after each change. Then one job
whose hosts fall below --min-np: it must end with exit code 1 and the launcher's error within
--elastic-timeout plus a few seconds.

  sudo python3 bench/elastic_scale_runs.py --build build --runs 5

Reports, per change, the time from the hosts file's change to the first step at the new size
(the discovery script runs every second; a new worker starts Python and torch), median and
worst. The ranks share this machine's cores, which shows in the times on a small machine.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = os.path.join(ROOT, "test", "python", "elastic", "train_elastic.py")
sys.path.insert(0, os.path.join(ROOT, "test", "cluster"))
sys.path.insert(0, os.path.join(ROOT, "bench", "suite"))
from cluster import Cluster  # noqa: E402
from common import torch_worker_env  # noqa: E402

STEPS = 60


def discovery(tmp, hosts):
    """A hosts file listing hosts and a discovery script that prints it."""
    path = os.path.join(tmp, "hosts")
    with open(path, "w") as f:
        f.write("".join(h + ":1\n" for h in hosts))
    script = os.path.join(tmp, "discover.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\ncat '%s'\n" % path)
    os.chmod(script, 0o755)
    return path, script


def first_step_at_size(out, size, after):
    times = [float(t) for s, t in re.findall(r"STEP \d+ SIZE (\d+) AT ([\d.]+)", out)
             if int(s) == size and float(t) > after]
    return min(times) if times else None


def run(binary, env, cluster, flags, extra, timeout):
    with tempfile.TemporaryDirectory() as tmp:
        hosts_file, script = discovery(tmp, cluster.hosts[:4])
        env = dict(env, ELASTIC_TEST_HOSTS_FILE=hosts_file, **extra)
        start = time.time()
        try:
            p = subprocess.run([binary, "run"] + flags + ["--host-discovery-script", script] +
                               cluster.discovery_flags() + [sys.executable, WORKER], env=env,
                               capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, time.time() - start
        return p, time.time() - start


def grow_and_shrink(binary, env, cluster, timeout):
    """(grow seconds, shrink seconds, '') or (None, None, why)."""
    keep = [cluster.hosts[i] + ":1" for i in (0, 1, 3, 4)]  # host 2 leaves
    p, took = run(binary, env, cluster, ["-np", "4", "--min-np", "3", "--max-np", "5"], {
        "ELASTIC_TEST_STEPS": str(STEPS), "ELASTIC_TEST_STEP_SLEEP": "0.05",
        "ELASTIC_TEST_GROW_AT": "5", "ELASTIC_TEST_GROW_SIZE": "4",
        "ELASTIC_TEST_GROW_HOST": cluster.hosts[4] + ":1",
        "ELASTIC_TEST_SHRINK_AT": "30", "ELASTIC_TEST_SHRINK_SIZE": "5",
        "ELASTIC_TEST_SHRINK_HOSTS": ",".join(keep)}, timeout)
    if p is None:
        return None, None, "hang (%.0f s)" % took
    done = re.findall(r"DONE STEP (\d+) SIZE (\d+) RANK (\d+) EQUAL (\w+)", p.stdout)
    if p.returncode != 0 or sorted(int(r) for _, _, r, _ in done) != [0, 1, 2, 3] or \
            any(int(s) != STEPS or int(z) != 4 or e != "True" for s, z, _, e in done):
        return None, None, "failed (exit %d): %s" % (p.returncode, p.stderr[-600:])
    synced = re.findall(r"SYNCED SIZE (\d+) STEP \d+ EQUAL (\w+)", p.stdout)
    if "False" in [e for _, e in synced] or "5" not in [z for z, _ in synced]:
        return None, None, "the fifth host did not receive equal parameters: %s" % synced
    if "rank 2 leaves the job" not in p.stderr or "error" in p.stderr.lower():
        return None, None, "the shrink was not clean: %s" % p.stderr[-600:]
    grew = float(re.search(r"GREW AT ([\d.]+)", p.stdout).group(1))
    shrank = float(re.search(r"SHRANK AT ([\d.]+)", p.stdout).group(1))
    at5 = first_step_at_size(p.stdout, 5, grew)
    at4 = first_step_at_size(p.stdout, 4, shrank)
    return at5 - grew, at4 - shrank, ""


def below_min(binary, env, cluster, timeout):
    """(True, how long it took to end) or (False, why it is wrong)."""
    # Long enough not to finish before the timeout.
    p, took = run(binary, env, cluster, ["-np", "4", "--min-np", "3", "--elastic-timeout", "5"], {
        "ELASTIC_TEST_STEPS": str(10 * STEPS), "ELASTIC_TEST_STEP_SLEEP": "0.05",
        "ELASTIC_TEST_SHRINK_AT": "10", "ELASTIC_TEST_SHRINK_SIZE": "4",
        "ELASTIC_TEST_SHRINK_HOSTS": ",".join(h + ":1" for h in cluster.hosts[:2])}, timeout)
    ended = time.time()
    if p is None:
        return False, "hang (%.0f s)" % took
    expected = "fewer than --min-np 3 workers (2) for 5 s (--elastic-timeout); ending the job"
    if p.returncode != 1 or expected not in p.stderr:
        return False, "exit %d without the error: %s" % (p.returncode, p.stderr[-600:])
    shrank = float(re.search(r"SHRANK AT ([\d.]+)", p.stdout).group(1))
    return True, "ended with exit code 1 and the error %.1f s after the change" % (ended - shrank)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 1)[1])
    p.add_argument("--build", default="build")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--rate", default="1gbit")
    p.add_argument("--timeout", type=float, default=240)
    a = p.parse_args()
    binary = os.path.join(os.path.abspath(a.build), "bin", "hvdsparse")
    env = torch_worker_env(a.build)
    grows, shrinks, bad = [], [], 0
    with Cluster(5, a.rate, tag="hes") as cluster:
        for i in range(a.runs):
            g, s, why = grow_and_shrink(binary, env, cluster, a.timeout)
            if why:
                bad += 1
                print("run %d: %s" % (i + 1, why), flush=True)
                continue
            grows.append(g)
            shrinks.append(s)
            print("run %d: grew 4 -> 5 in %.3f s, shrank 5 -> 4 in %.3f s" % (i + 1, g, s),
                  flush=True)
        ended, how = below_min(binary, env, cluster, a.timeout)
        bad += not ended
        print("below --min-np: %s" % how, flush=True)
    print("%d runs: %d finished, %d failed or hung" % (a.runs, len(grows), a.runs - len(grows)))
    for name, xs in (("grow 4 -> 5", grows), ("shrink 5 -> 4", shrinks)):
        if xs:
            print("%s: median %.3f s, worst %.3f s, best %.3f s" % (
                name, statistics.median(xs), max(xs), min(xs)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
