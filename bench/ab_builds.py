#!/usr/bin/env python3
"""Two builds of hvdsparse against each other: the benchmark suite's hvdsparse-perf allreduce
sweep (bench/suite/run.py) run from build A and from build B in turn, REPS times each (A B A B
...), so both see the same machine. Prints, per scenario, process count and size, the median
time of each build over its runs, the spread (max/min) and the ratio B/A.

  python3 bench/ab_builds.py --a BUILD_A --b BUILD_B --reps 5 \\
      --scenarios loopback,4x1gbit --np 2,4 --sizes 64K:64M:4

The cluster scenarios need root (bench/suite/cluster.py). Raw rows of every run go to --out.
"""
import argparse
import csv
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SUITE = os.path.join(HERE, "suite", "run.py")


def run_suite(build, out, args):
    cmd = [sys.executable, SUITE, "--build", build, "--out", out, "--impls", "hvdsparse",
           "--reps", "1", "--scenarios", args.scenarios, "--np", args.np, "--sizes", args.sizes,
           "--cluster-sizes", args.cluster_sizes, "--iters", str(args.iters),
           "--warmup", str(args.warmup)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def read_rows(out):
    rows = []
    for name in ("loopback_raw.csv", "cluster_raw.csv"):
        path = os.path.join(out, name)
        if os.path.exists(path):
            with open(path) as f:
                rows += [r for r in csv.DictReader(f) if r["impl"] == "hvdsparse"]
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 1)[1])
    p.add_argument("--a", required=True, help="build dir of A (holds bin/)")
    p.add_argument("--b", required=True, help="build dir of B")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--scenarios", default="loopback")
    p.add_argument("--np", default="2,4")
    p.add_argument("--sizes", default="64K:64M:4")
    p.add_argument("--cluster-sizes", default="1M:64M:4")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--out", default="build/ab")
    args = p.parse_args()
    times = {}  # (build, scenario, np, bytes) -> [median us of each run]
    for rep in range(args.reps):
        for label, build in (("A", args.a), ("B", args.b)):
            out = os.path.join(args.out, f"{label}{rep}")
            run_suite(os.path.abspath(build), out, args)
            for r in read_rows(out):
                key = (label, r["scenario"], int(r["np"]), int(r["bytes"]))
                times.setdefault(key, []).append(float(r["time_us"]))
            print(f"run {rep + 1}/{args.reps} of {label} done", file=sys.stderr)
    print("| scenario | np | bytes | A median us | A max/min | B median us | B max/min | B/A |")
    print("|---|---|---|---|---|---|---|---|")
    for key in sorted(k[1:] for k in times if k[0] == "A"):
        a, b = times[("A",) + key], times.get(("B",) + key, [])
        if not b:
            continue
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"| {key[0]} | {key[1]} | {key[2]} | {ma:.1f} | {max(a) / min(a):.2f} | "
              f"{mb:.1f} | {max(b) / min(b):.2f} | {mb / ma:.3f} |")


if __name__ == "__main__":
    main()
