#!/usr/bin/env python3
"""Runs files of Horovod's own test suite (test/parallel of its sources) against hvdsparse, one
test per job under `hvdsparse run --horovod-alias`, and tabulates each test's outcome
(docs/horovod-compatibility.md, section 5).

One job per test: a test that fails on one rank only can leave the ranks out of step for the
tests after it. Each job has a time limit; a job past it is a hang, and its processes (the
launcher's session, started here) are ended.

The runner works on a copy of Horovod's test/ folder. With --leave-out-optimizer NAME,
test_torch.py's optimizer sweeps (every torch.optim.Optimizer subclass but LBFGS and SparseAdam)
leave out NAME too: torch 2.9 and later ship Muon, which refuses the tests' 1-D parameters in its
constructor, before any collective runs.

Usage: run_parallel_tests.py --horovod-src DIR --file test_torch.py --np 2 [--python PY]
       [--launcher build/bin/hvdsparse] [--timeout 120] [--jobs 2] [--json OUT] [-k EXPR]
       [--leave-out-optimizer Muon]
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

RANK_PREFIX = re.compile(r"^\[\d+\]<std(out|err)>:")
OUTCOME = re.compile(r"\b(\d+) (passed|failed|skipped|error|errors)\b")


def prepare(horovod_src, scratch, leave_out):
    """A copy of Horovod's test/ folder whose torch optimizer sweeps leave out the optimizers
    named in leave_out."""
    dst = os.path.join(scratch, "test")
    shutil.copytree(os.path.join(horovod_src, "test"), dst)
    if leave_out:
        torch_tests = os.path.join(dst, "parallel", "test_torch.py")
        with open(torch_tests) as f:
            text = f.read()
        sweep = "subclass != torch.optim.SparseAdam\n"
        if sweep not in text:
            sys.exit("run_parallel_tests: no optimizer sweep ('%s') in %s"
                     % (sweep.strip(), torch_tests))
        names = " and ".join("subclass.__name__ != %r" % n for n in leave_out)
        with open(torch_tests, "w") as f:
            f.write(text.replace(sweep, sweep.strip() + " and " + names + "\n"))
    return os.path.join(dst, "parallel")


def collect(args, parallel, env):
    """The file's test node ids, as pytest collects them (one rank under the alias)."""
    cmd = [args.launcher, "run", "--horovod-alias", "-np", "1", args.python, "-m", "pytest",
           "--collect-only", "-q", "-p", "no:cacheprovider", args.file]
    if args.expr:
        cmd += ["-k", args.expr]
    out = subprocess.run(cmd, cwd=parallel, env=env, capture_output=True, text=True,
                         timeout=300)
    lines = [RANK_PREFIX.sub("", line) for line in out.stdout.splitlines()]
    ids = [line.strip() for line in lines if "::" in line]
    if not ids:
        sys.exit("run_parallel_tests: pytest collected nothing from %s:\n%s%s"
                 % (args.file, out.stdout[-2000:], out.stderr[-2000:]))
    return ids


def run_one(args, parallel, env, node_id):
    """(node id, outcome, seconds, log tail) of one test in a job of its own."""
    cmd = [args.launcher, "run", "--horovod-alias", "-np", str(args.np), args.python, "-m",
           "pytest", "-q", "-p", "no:cacheprovider", node_id]
    t0 = time.time()
    proc = subprocess.Popen(cmd, cwd=parallel, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the launcher's own session: what we started
        out, _ = proc.communicate()
        return node_id, "hang", time.time() - t0, out[-3000:]
    counts = {}
    for n, word in OUTCOME.findall(out):
        word = "error" if word == "errors" else word
        counts[word] = max(counts.get(word, 0), int(n))
    if proc.returncode == 0 and counts.get("passed"):
        outcome = "passed"
    elif proc.returncode == 0 and counts.get("skipped"):
        outcome = "skipped"
    else:
        outcome = "failed"
    return node_id, outcome, time.time() - t0, out[-3000:]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--horovod-src", required=True, help="Horovod's source tree (its test/ is used)")
    p.add_argument("--file", required=True, help="a file of test/parallel, e.g. test_torch.py")
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--launcher", default=os.path.join("build", "bin", "hvdsparse"))
    p.add_argument("--timeout", type=float, default=120, help="seconds per job")
    p.add_argument("--jobs", type=int, default=1, help="jobs at a time")
    p.add_argument("-k", dest="expr", default=None, help="pytest's -k, to run a subset")
    p.add_argument("--json", default=None, help="write every outcome and log tail here")
    p.add_argument("--leave-out-optimizer", action="append", default=[], metavar="NAME",
                   help="an optimizer test_torch.py's sweeps leave out (e.g. Muon)")
    args = p.parse_args()
    args.launcher = os.path.abspath(args.launcher)

    scratch = tempfile.mkdtemp(prefix="horovod-tests-")
    try:
        parallel = prepare(args.horovod_src, scratch, args.leave_out_optimizer)
        env = dict(os.environ)
        ids = collect(args, parallel, env)
        print("%s: %d tests, np %d, one job each" % (args.file, len(ids), args.np), flush=True)
        results = []
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for node_id, outcome, secs, tail in pool.map(
                    lambda i: run_one(args, parallel, env, i), ids):
                results.append({"test": node_id, "outcome": outcome, "seconds": round(secs, 1),
                                "tail": tail})
                print("%-8s %6.1f s  %s" % (outcome, secs, node_id), flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    totals = {k: sum(r["outcome"] == k for r in results)
              for k in ("passed", "failed", "skipped", "hang")}
    print("| file | np | passed | failed | skipped | hangs |")
    print("| `%s` (%d tests) | %d | %d | %d | %d | %d |" % (
        args.file, len(results), args.np, totals["passed"], totals["failed"],
        totals["skipped"], totals["hang"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"file": args.file, "np": args.np, "totals": totals,
                       "results": results}, f, indent=1)
    return 0 if totals["failed"] == 0 and totals["hang"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
