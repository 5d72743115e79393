#!/usr/bin/env python3
"""Randomized elastic kill runs: N jobs of the elastic torch test worker
(test/python/elastic/train_elastic.py) at -np 4 --min-np 3, each with one rank, chosen at
random, SIGKILLing itself at a random step. Each run must finish every step at size 3 with
equal parameters on every rank (the worker allgathers them at the end). Prints one line per run
(rank, step, recovery time from the kill to the first step at size 3) and the median and worst
recovery, or the runs that failed or hung.

  python3 bench/elastic_kill_runs.py --build build --runs 20 --seed 1

Runs on one host (loopback); the ranks share this machine's cores, which shows in the
recovery times on a small machine.
"""
import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = os.path.join(ROOT, "test", "python", "elastic", "train_elastic.py")
STEPS = 40


def one_run(binary, env, rank, step, timeout):
    env = dict(env, ELASTIC_TEST_KILL_AT=str(step), ELASTIC_TEST_KILL_SIZE="4",
               ELASTIC_TEST_KILL_RANK=str(rank), ELASTIC_TEST_STEPS=str(STEPS))
    try:
        p = subprocess.run([binary, "run", "-np", "4", "--min-np", "3", "--elastic-timeout", "30",
                            sys.executable, WORKER], env=env, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return "hang", None
    done = re.findall(r"DONE STEP (\d+) SIZE (\d+) RANK (\d+) EQUAL (\w+)", p.stdout)
    ok = (p.returncode == 0 and sorted(int(r) for _, _, r, _ in done) == [0, 1, 2] and
          all(int(s) == STEPS and int(z) == 3 and e == "True" for s, z, _, e in done))
    killed = re.search(r"KILLED AT ([\d.]+)", p.stdout)
    if not ok or not killed:
        return "failed (exit %d): %s" % (p.returncode, p.stderr[-400:]), None
    at = float(killed.group(1))
    firsts = [float(t) for z, t in re.findall(r"STEP \d+ SIZE (\d+) AT ([\d.]+)", p.stdout)
              if int(z) == 3 and float(t) > at]
    return "ok", min(firsts) - at


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 1)[1])
    p.add_argument("--build", default="build")
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout", type=float, default=180)
    a = p.parse_args()
    binary = os.path.join(os.path.abspath(a.build), "bin", "hvdsparse")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(ROOT, "frameworks", d) for d in ("common", "pytorch")] +
        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.setdefault("HVDSPARSE_LIBRARY", os.path.join(os.path.abspath(a.build), "lib",
                                                     "libhvdsparse.so"))
    rng = random.Random(a.seed)
    recoveries, bad = [], []
    for i in range(a.runs):
        rank, step = rng.randrange(4), rng.randrange(2, STEPS - 5)
        start = time.time()
        status, rec = one_run(binary, env, rank, step, a.timeout)
        print("run %2d: rank %d killed at step %2d: %s%s (job %.1f s)" % (
            i + 1, rank, step, status, "" if rec is None else ", recovery %.3f s" % rec,
            time.time() - start), flush=True)
        (recoveries.append(rec) if rec is not None else bad.append((i + 1, status)))
    print("%d runs: %d finished, %d failed or hung" % (a.runs, len(recoveries), len(bad)))
    if recoveries:
        print("recovery: median %.3f s, worst %.3f s, best %.3f s" % (
            statistics.median(recoveries), max(recoveries), min(recoveries)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
