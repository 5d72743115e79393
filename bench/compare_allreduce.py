#!/usr/bin/env python3
"""Loopback-only allreduce comparison: the benchmark suite (bench/suite/run.py) limited to the
"loopback" scenario. Kept for the command lines in older notes; the options are the suite's
(--build, --out, --np, --sizes, --reps, --iters, --warmup, --impls, --gloo-algorithm, --timeout,
--doc), e.g.

  python3 bench/compare_allreduce.py --build build --out build/compare --np 2,4 --sizes 1M:256M:4
"""
import os
import sys

SUITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "suite", "run.py")

if __name__ == "__main__":
    if any(a == "-h" or a == "--help" for a in sys.argv[1:]):
        print(__doc__)
    os.execv(sys.executable, [sys.executable, SUITE, "--scenarios", "loopback"] + sys.argv[1:])
