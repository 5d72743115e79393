#!/usr/bin/env python3
"""Run-to-run spread and warm-up of the one-host allreduce, against Open MPI's default transport.

For every np and size, RUNS rounds; each round starts, in turn (the order rotating by one each
round), fresh jobs timed the same way (float32 sum in place, every iteration timed from
its start to its end on every rank, no barrier in between, the slowest rank's time, the median
over the iterations):
  hvdsparse       `hvdsparse run -np N hvdsparse-perf allreduce -n LONG -w WARM`
  hvdsparse-short the same with -n SHORT -w 0: the first SHORT operations after init
  mpi             `mpirun -np N mpi_allreduce_bench -n LONG -w WARM` (Open MPI's defaults: shared
                  memory, its own algorithm selection)
and among them the machine alone, twice: `memory_pass -b SIZE -t N -n LONG -w WARM` (N threads,
one per rank and pinned as the ranks are, each adding a buffer of SIZE into another between
barriers: the memory work of the allreduce without its communication), and the same with -x
(exchange: the threads also read each other's freshly written parts, as the ranks of a
shared-memory allreduce do, with no protocol at all), long and, like hvdsparse-short, with -n
SHORT -w 0. Reports per point: each implementation's median over the rounds, every job's
max/min over the rounds (no collective that moves the same bytes between the same CPUs can be
steadier than the exchange pass), short / long for hvdsparse and for the exchange pass (what
warms up in the machine itself), and hvdsparse / Open MPI (time; below 1 hvdsparse is faster).

    python3 bench/allreduce_stability.py --build build --np 2,4 --sizes 64K,1M,16M --runs 8
Writes OUT/stability_raw.csv (one row per job) and OUT/stability.md (the table).
"""
import argparse
import csv
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "suite"))
from common import parse_size, run_procs  # noqa: E402


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--out", default=None, help="output folder (default BUILD/bench-stability)")
    p.add_argument("--np", default="2,4")
    p.add_argument("--sizes", default="64K,256K,1M,4M,16M,64M,256M")
    p.add_argument("--runs", type=int, default=8)
    p.add_argument("--long", type=int, default=300, help="timed operations of a long run")
    p.add_argument("--short", type=int, default=20, help="timed operations right after init")
    p.add_argument("--warmup", type=int, default=5, help="untimed operations of a long run")
    p.add_argument("--max-seconds", type=float, default=20.0,
                   help="fewer long operations where LONG would take longer (large sizes)")
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--table-from", default=None,
                   help="a stability_raw.csv of an earlier run: print its table, run nothing")
    return p.parse_args()


def job(args, impl, np_, size, iters, warm):
    b = os.path.join(args.build, "bin")
    s = str(size)
    machine = impl in ("machine", "exchange")
    if machine:
        cmd = [os.path.join(b, "memory_pass"), "-t", str(np_)] + (["-x"] * (impl == "exchange"))
    elif impl == "mpi":
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(np_),
               os.path.join(b, "mpi_allreduce_bench")]
    else:
        cmd = [os.path.join(b, "hvdsparse"), "run", "-np", str(np_),
               os.path.join(b, "hvdsparse-perf"), "allreduce"]
    cmd += ["-b", s] + ([] if machine else ["-e", s])
    cmd += ["-n", str(iters), "-w", str(warm), "--csv"]
    t0 = time.time()
    rc, out, err = run_procs([cmd], args.timeout)  # a hung job: its process group killed
    rows = [ln.split(">:", 1)[-1] for ln in out.splitlines()]
    rows = [ln for ln in rows if ln and not ln.startswith("#")]
    if rc != 0 or len(rows) < 2:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), rc, err[-2000:]))
    row = dict(zip(rows[0].split(","), rows[-1].split(",")))
    return {"impl": impl, "np": np_, "bytes": size, "iters": iters,
            "time_us": float(row["time_us"]),
            "first_us": float(row.get("first_us", "nan")), "max_us": float(row["max_us"]),
            "wall_s": time.time() - t0, "load": os.getloadavg()[0]}


def long_iters(args, np_, size, probe_us):
    """LONG, or fewer where a long run would take more than --max-seconds."""
    if probe_us <= 0:
        return args.long
    return max(args.short, min(args.long, int(args.max_seconds * 1e6 / probe_us)))


def table(raw, short):
    """The markdown table of one run's rows (every np and size in them, in order)."""
    nps = sorted({r["np"] for r in raw})
    sizes = sorted({r["bytes"] for r in raw})
    lines = ["| np | size | long ops | hvdsparse us (min-max) | max/min | short (%d ops) us | "
             "short / long | machine's exchange pass short / long | Open MPI us (min-max) | "
             "Open MPI max/min | machine's memory pass max/min | machine's exchange pass us, "
             "max/min | hvdsparse / Open MPI |" % short,
             "|---" * 13 + "|"]
    for np_ in nps:
        for size in sizes:
            def times(impl):
                return [r["time_us"] for r in raw
                        if r["impl"] == impl and r["np"] == np_ and r["bytes"] == size]
            h, s, m = times("hvdsparse"), times("hvdsparse-short"), times("mpi")
            machine, exchange = times("machine"), times("exchange")
            xs = times("exchange-short")
            warming = "%.2f" % (statistics.median(xs) / statistics.median(exchange)) \
                if xs and exchange else "-"
            spread = "%.2f" % (max(machine) / min(machine)) if machine else "-"
            handoff = "%.1f, %.2f" % (statistics.median(exchange), max(exchange) / min(exchange)) \
                if exchange else "-"
            if not (h and s and m):
                continue
            n = [r["iters"] for r in raw if r["impl"] == "hvdsparse" and r["np"] == np_
                 and r["bytes"] == size][0]
            hm, sm, mm = statistics.median(h), statistics.median(s), statistics.median(m)
            lines.append("| %d | %s | %d | %.1f (%.1f-%.1f) | %.2f | %.1f | %.2f | %s "
                         "| %.1f (%.1f-%.1f) | %.2f | %s | %s | %.2f |"
                         % (np_, human(size), n, hm, min(h), max(h), max(h) / min(h), sm, sm / hm,
                            warming, mm, min(m), max(m), max(m) / min(m), spread, handoff,
                            hm / mm))
    return "\n".join(lines) + "\n"


def main():
    args = parse()
    if args.table_from:
        with open(args.table_from) as f:
            raw = [dict(r, np=int(r["np"]), bytes=int(r["bytes"]), iters=int(r["iters"]),
                        time_us=float(r["time_us"])) for r in csv.DictReader(f)]
        print(table(raw, args.short))
        return
    out = args.out or os.path.join(args.build, "bench-stability")
    os.makedirs(out, exist_ok=True)
    nps = [int(x) for x in args.np.split(",")]
    sizes = [parse_size(x) for x in args.sizes.split(",")]
    raw = []
    for np_ in nps:
        for size in sizes:
            probe = job(args, "hvdsparse", np_, size, 5, 1)["time_us"]
            n = long_iters(args, np_, size, probe)
            kinds = [("hvdsparse", n, args.warmup), ("hvdsparse-short", args.short, 0),
                     ("mpi", n, args.warmup), ("machine", n, args.warmup),
                     ("exchange", n, args.warmup), ("exchange-short", args.short, 0)]
            for run in range(args.runs):
                order = kinds[run % len(kinds):] + kinds[:run % len(kinds)]
                for impl, iters, warm in order:
                    r = job(args, impl[:-len("-short")] if impl.endswith("-short") else impl,
                            np_, size, iters, warm)
                    r.update(impl=impl, run=run)
                    raw.append(r)
                    print("np %d %9d B run %d %-15s %10.1f us (first %.1f, load %.1f)" % (
                        np_, size, run, impl, r["time_us"], r["first_us"], r["load"]), flush=True)
    with open(os.path.join(out, "stability_raw.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(raw[0].keys()))
        w.writeheader()
        w.writerows(raw)
    text = table(raw, args.short)
    with open(os.path.join(out, "stability.md"), "w") as f:
        f.write(text)
    print(text)


def human(b):
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= k and b % k == 0:
            return "%d %s" % (b // k, unit)
    return "%d B" % b


if __name__ == "__main__":
    main()
