"""The sparse selector against every algorithm, over a sweep of sizes, densities and supports.

For every point, `hvdsparse-perf sparse_allreduce --algorithm all --csv` times each algorithm
(median over its iterations of the slowest rank) in one job; this script reads the selector's
pick from the same job and reports the pick's measured time against the best measured one.
Issue 6's line: the pick is never more than 10% slower than the best at any point.

Each algorithm runs under its own tensor name, first the warm-up (at least one operation, from
which the runtime learns the supports' overlap for the name; the `auto` row's pick is the
selector's with that overlap), then --iters timed operations, and more when they are short: about
--min-time seconds' worth (hvdsparse-perf --min-time), so that millisecond points have stable
medians; those further operations run one of each algorithm in turn (hvdsparse-perf
--interleave; --blocks: each algorithm's all together, as before), so that a change in the
machine's load reaches every algorithm alike. The job runs --rounds times per point (the
algorithms in the same order each time, so every algorithm is measured early and late alike);
an algorithm's time is the median of its rounds' medians, and the pick is the one most rounds
made (ties: the last round's). The spread column gives the pick's and the best's round-to-round
range.

    python3 bench/sparse_sweep.py --cluster 4x1gbit [--build build] [--out DIR]
    python3 bench/sparse_sweep.py --np 4                (loopback)
    python3 bench/sparse_sweep.py --cluster 8x10gbit --grid wide --plot

--cluster brings up namespace hosts with test/cluster/cluster.sh (root) and takes them down.
Writes DIR/sparse_sweep.csv (every row of every job) and prints one line per point.
"""
import argparse
import csv
import io
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# (N, row, density, generator) points: a table of sizes, densities and support shapes.
POINTS = [(n, 1, d, g) for n in ("1M", "16M") for d in (0.001, 0.01, 0.1)
          for g in ("uniform", "zipf", "overlap")] + [("256K", 64, 0.01, "uniform"),
                                                      ("256K", 64, 0.01, "zipf")]
# --grid wide: the density range of issue 6's sweep, 0.01% to 50%, at N = 2^20.
WIDE = [("1M", 1, d, g) for d in (0.0001, 0.001, 0.01, 0.1, 0.5)
        for g in ("uniform", "zipf", "overlap")]


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--out", default=None, help="output folder (default BUILD/bench)")
    p.add_argument("--cluster", help="HxRATE, e.g. 4x1gbit: namespace hosts, one rank each")
    p.add_argument("--np", type=int, default=4, help="ranks on loopback (without --cluster)")
    p.add_argument("--iters", type=int, default=5, help="timed operations, at least")
    p.add_argument("--min-time", type=float, default=1.0,
                   help="seconds of timed operations per algorithm to aim for (0: --iters exactly)")
    p.add_argument("--warmup", type=int, default=1,
                   help="untimed operations per algorithm (at least 1: the overlap is learned)")
    p.add_argument("--rounds", type=int, default=5,
                   help="jobs per point; medians over them (1: one job, as before)")
    p.add_argument("--quant-bits", type=int, default=0,
                   help="2, 4 or 8: quantized gathers (hvdsparse-perf --quant-bits); 0: none")
    p.add_argument("--timeout", type=float, default=900, help="seconds per job")
    p.add_argument("--blocks", action="store_true",
                   help="time each algorithm's operations together, not interleaved")
    p.add_argument("--quick", action="store_true", help="two small points (a smoke test)")
    p.add_argument("--grid", choices=["selector", "wide"], default="selector",
                   help="selector: the 20 points of the selector's line (0.1-10%%, 2^20 and "
                   "2^24, rows); wide: 0.01%% to 50%% at 2^20")
    p.add_argument("--plot", action="store_true",
                   help="also write DIR/sparse_sweep.png (bench/sparse_plot.py; matplotlib)")
    args = p.parse_args()
    if args.warmup < 1:
        p.error("--warmup must be at least 1: the first operation of a name teaches the overlap")
    return args


def run_point(args, launch, point):
    n, row, density, gen = point
    cmd = launch + [os.path.join(args.build, "bin", "hvdsparse-perf"), "sparse_allreduce",
                    "-N", n, "--density", str(density), "--generator", gen,
                    "--algorithm", "all", "-n", str(args.iters), "-w", str(args.warmup),
                    "--min-time", str(args.min_time), "--csv"]
    if args.quant_bits:
        cmd += ["--quant-bits", str(args.quant_bits)]
    if not args.blocks:
        cmd += ["--interleave"]
    if row > 1:
        cmd += ["--row", str(row)]
    if gen == "overlap":
        cmd += ["--overlap", "0.5"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    lines = [l.split(":", 1)[1] if l.startswith("[0]<stdout>:") else l
             for l in out.stdout.splitlines()]
    lines = [l for l in lines if l and not l.startswith("#") and not l.startswith("[")]
    if out.returncode != 0 or not lines:
        raise SystemExit("job failed (%d): %s\n%s" % (out.returncode, " ".join(cmd),
                                                      out.stdout[-2000:] + out.stderr[-2000:]))
    return list(csv.DictReader(io.StringIO("\n".join(lines))))


def summarize(rounds):
    """(best algorithm, its ms, the pick, the pick's ms, pick / best, spread text) over the
    rounds' rows: per algorithm the median of its rounds' times."""
    times = {}
    for rows in rounds:
        for r in rows:
            if r["algorithm"] not in ("allreduce", "auto"):
                times.setdefault(r["algorithm"], []).append(float(r["time_ms"]))
    algos = {a: statistics.median(t) for a, t in times.items()}
    best = min(algos, key=algos.get)
    picks = [next(r["pick"] for r in rows if r["algorithm"] == "auto") for rows in rounds]
    pick = max(reversed(picks), key=picks.count)
    spread = "%.2f-%.2f / %.2f-%.2f" % (min(times[pick]), max(times[pick]), min(times[best]),
                                        max(times[best]))
    return best, algos[best], pick, algos[pick], algos[pick] / algos[best], spread


def main():
    args = parse()
    out_dir = args.out or os.path.join(args.build, "bench")
    os.makedirs(out_dir, exist_ok=True)
    launcher = os.path.join(args.build, "bin", "hvdsparse")
    cluster = None
    if args.cluster:
        sys.path.insert(0, os.path.join(HERE, "suite"))
        from cluster import Cluster
        hosts, rate = args.cluster.split("x", 1)
        cluster = Cluster(int(hosts), rate, "ssx-")
        cluster.__enter__()
        launch = [launcher, "run", "-np", hosts] + cluster.launcher_flags()
    else:
        launch = [launcher, "run", "-np", str(args.np)]
    points = ([("64K", 1, 0.01, "uniform"), ("64K", 1, 0.1, "zipf")] if args.quick else
              WIDE if args.grid == "wide" else POINTS)
    every, worst = [], 0.0
    try:
        print("N,row,density,generator,best,best_ms,pick,pick_ms,pick/best,overlap,"
              "pick range / best range (ms)", flush=True)
        for point in points:
            rounds = []
            for k in range(args.rounds):
                rows = run_point(args, launch, point)
                for r in rows:
                    r["round"] = k
                rounds.append(rows)
                every.extend(rows)
            best, best_ms, pick, pick_ms, ratio, spread = summarize(rounds)
            worst = max(worst, ratio)
            overlap = next(r["overlap"] for r in rounds[-1] if r["algorithm"] == "auto")
            print("%s,%d,%g,%s,%s,%.2f,%s,%.2f,%.2f,%s,%s" % (
                point + (best, best_ms, pick, pick_ms, ratio, overlap, spread)), flush=True)
    finally:
        if cluster:
            cluster.__exit__(None, None, None)
    with open(os.path.join(out_dir, "sparse_sweep.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(every[0].keys()))
        w.writeheader()
        w.writerows(every)
    print("# worst pick/best over %d points: %.2f (line: at most 1.10)" % (len(points), worst))
    if args.plot:
        import sparse_plot
        where = args.cluster or "loopback, np %d" % args.np
        sparse_plot.plot(every, os.path.join(out_dir, "sparse_sweep.png"),
                         "sparse allreduce, %s: every algorithm and the selector's pick" % where)


if __name__ == "__main__":
    main()
