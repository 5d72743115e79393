#!/usr/bin/env python3
"""The benchmark suite (`make bench`): dense float32 sum allreduce of hvdsparse next to its peers,
on this host's loopback and on namespace hosts with shaped links, in one run.

Implementations (bench/suite/peers.py): hvdsparse (hvdsparse-perf), Gloo's own allreduce, Open MPI
(TCP; on loopback also its defaults, shared memory), torch.distributed with the gloo backend, and
Horovod with its gloo controller when --horovod-python names a Python that imports horovod.torch.
Scenarios: "loopback" (np from --np) and HxRATE, e.g. 4x1gbit: test/cluster/cluster.sh brings up
H hosts (prefix --prefix) with links shaped to RATE, one rank per host, and takes them down on every
way out. On each cluster one TCP stream between two hosts measures the link rate first.
For every repetition the implementations run round-robin (the order rotates each repetition), each
over the whole size sweep. Output in --out: loopback_raw.csv, loopback_summary.csv,
loopback_allreduce.png, cluster_raw.csv, cluster_summary.csv, cluster_allreduce.png, linkrate.csv,
tables.md and runs.log (every command and its output); with --doc, the marked sections of that
file are rewritten.

  python3 bench/suite/run.py --build build --out docs/benchmarks --doc docs/benchmarks.md
  python3 bench/suite/run.py --build build --quick --out build/bench-quick
"""
import argparse
import csv
import datetime
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import linkrate  # noqa: E402
import peers  # noqa: E402
import report  # noqa: E402
from cluster import Cluster, ClusterError  # noqa: E402
from common import parse_rows, parse_sizes, run_procs, sweeps  # noqa: E402

LOOP_MARKS = ("<!-- allreduce-table:start -->", "<!-- allreduce-table:end -->")
CLUSTER_MARKS = ("<!-- cluster-table:start -->", "<!-- cluster-table:end -->")
RATE_UNITS = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}


def parse_scenario(text):
    """'loopback' or 'HxRATE' (4x1gbit) -> None or (hosts, rate, bit/s)."""
    if text == "loopback":
        return None
    m = re.fullmatch(r"(\d+)x(\d+(?:\.\d+)?)(kbit|mbit|gbit)", text)
    if not m:
        raise argparse.ArgumentTypeError(f"scenario {text!r}: loopback or HxRATE, e.g. 4x1gbit")
    return int(m.group(1)), m.group(2) + m.group(3), float(m.group(2)) * RATE_UNITS[m.group(3)]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 1)[1])
    p.add_argument("--build", default="build", help="build dir holding bin/")
    p.add_argument("--out", default=None, help="output dir (default BUILD/bench)")
    p.add_argument("--doc", default=None, help="markdown file whose marked sections to rewrite")
    p.add_argument("--quick", action="store_true",
                   help="2 repetitions, fewer sizes and iterations, loopback np 4 and 4x1gbit")
    p.add_argument("--scenarios", default="loopback,4x1gbit,4x10gbit,2x1gbit")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--np", default="2,4", help="loopback process counts")
    p.add_argument("--sizes", type=parse_sizes, default=parse_sizes("1M:256M:4"),
                   help="loopback sizes: first:last:factor or a list (K/M/G)")
    p.add_argument("--cluster-sizes", type=parse_sizes, default=parse_sizes("1M:256M:4"))
    p.add_argument("--iters", type=int, default=10, help="timed iterations per size, loopback")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--cluster-iters", type=int, default=5)
    p.add_argument("--cluster-warmup", type=int, default=1)
    p.add_argument("--impls", default=",".join(peers.IMPLS))
    p.add_argument("--gloo-algorithm", default="default")
    p.add_argument("--horovod-python", default=os.environ.get("HVDS_BENCH_HOROVOD_PYTHON"),
                   help="a Python that imports horovod.torch (default $HVDS_BENCH_HOROVOD_PYTHON)")
    p.add_argument("--prefix", default="bnx-", help="cluster.sh prefix of the suite's hosts")
    p.add_argument("--linkrate-seconds", type=float, default=3.0)
    p.add_argument("--timeout", type=float, default=900, help="seconds per tool invocation")
    p.add_argument("--replot", action="store_true",
                   help="run nothing: redo tables, plots and --doc from the CSVs in --out")
    a = p.parse_args()
    if a.quick:
        a.reps, a.np = min(a.reps, 2), "4"
        a.sizes, a.cluster_sizes = parse_sizes("1M:16M:4"), parse_sizes("16M,64M")
        a.iters, a.warmup, a.cluster_iters = 5, 1, 3
        if a.scenarios == p.get_default("scenarios"):
            a.scenarios = "loopback,4x1gbit"
    a.build = os.path.abspath(a.build)
    a.out = os.path.abspath(a.out or os.path.join(a.build, "bench"))
    a.scenario_list = [(s, parse_scenario(s)) for s in a.scenarios.split(",") if s]
    a.impl_list = [i for i in a.impls.split(",") if i]
    bad = set(a.impl_list) - set(peers.ORDER)
    if bad:
        p.error(f"unknown implementations {sorted(bad)}; known: {peers.ORDER}")
    return a


def run_one(impl, place, sweep, args, log):
    """Runs impl's sweep on place; returns its rows (empty after a failure or a timeout)."""
    scratch = tempfile.mkdtemp(prefix="hvds-bench-")  # /tmp: every namespace sees it
    rdv = None
    try:
        if impl == "horovod":
            rdv = peers.start_horovod_rendezvous(place, args, scratch)
        cmds, envs = peers.commands(impl, place, sweep, args, scratch)
        log.write("$ " + " ".join(cmds[0]) + (f"  (x{len(cmds)} ranks)" if len(cmds) > 1 else "")
                  + f"\n# load average {os.getloadavg()[0]:.1f}\n")
        log.flush()  # a hang shows what is running
        t0 = time.monotonic()
        rc, out, err = run_procs(cmds, args.timeout, envs)
    except (TimeoutError, OSError, RuntimeError) as e:
        log.write(f"FAILED {e}\n")
        print(f"  {impl:11s} {place.name}: {e}", flush=True)
        return []
    finally:
        if rdv is not None:
            peers.stop(rdv)
        shutil.rmtree(scratch, ignore_errors=True)
    log.write(out + err + f"# rc {rc}, {time.monotonic() - t0:.1f} s\n")
    log.flush()
    rows = parse_rows(out)
    bad = [r for r in rows if r["wrong"] != 0]
    status = "ok" if rc == 0 and not bad else f"rc {rc}, {len(bad)} rows with errors"
    print(f"  {impl:11s} {place.name}: {len(rows)} rows, {time.monotonic() - t0:.1f} s, {status}",
          flush=True)
    return rows


def run_reps(places, impls, sizes, args, log, extra):
    """All repetitions over places (all with the same implementations); returns rows."""
    raw = []
    for rep in range(args.reps):
        order = impls[rep % len(impls):] + impls[:rep % len(impls)]
        print(f"repetition {rep + 1}/{args.reps}", flush=True)
        for place in places:
            for impl in order:
                for sw in sweeps(sizes):
                    for r in run_one(impl, place, sw, args, log):
                        r.update(extra, impl=impl, rep=rep)
                        raw.append(r)
    return raw


def usable(impls, args, notes, where):
    out = []
    for i in impls:
        why = peers.available(i, args)
        if why is None and where != "loopback" and i in peers.LOOPBACK_ONLY:
            continue
        if why:
            notes.append((where, f"{peers.LABELS[i]}: {why}"))
            print(f"skipping {i} ({where}): {why}", flush=True)
        else:
            out.append(i)
    return out


def run_loopback(args, log, notes):
    impls = usable(args.impl_list, args, notes, "loopback")
    places = [peers.Loopback(int(n)) for n in args.np.split(",")]
    print(f"== loopback, np {args.np}: {', '.join(impls)}", flush=True)
    return run_reps(places, impls, args.sizes, args, log, {"scenario": "loopback"})


def run_cluster(name, spec, args, log, notes, links):
    hosts, rate, bps = spec
    impls = usable(args.impl_list, args, notes, name)
    print(f"== {name}: {hosts} hosts, links {rate}: {', '.join(impls)}", flush=True)
    saved = (args.iters, args.warmup)
    args.iters, args.warmup = args.cluster_iters, args.cluster_warmup
    try:
        with Cluster(hosts, rate, args.prefix, log=log) as cl:
            measured = linkrate.measure(cl, 0, 1, args.linkrate_seconds) if hosts > 1 else bps
            print(f"  one TCP stream h0 -> h1: {measured / 1e6:.0f} Mbit/s", flush=True)
            links[name] = dict(hosts=hosts, rate=rate, rate_bps=bps, measured_bps=measured)
            place = peers.OnCluster(cl, name)
            extra = {"scenario": name, "hosts": hosts, "rate_bps": bps, "measured_bps": measured}
            return run_reps([place], impls, args.cluster_sizes, args, log, extra)
    except (ClusterError, subprocess.SubprocessError, RuntimeError) as e:
        notes.append((name, f"the cluster: {e}"))
        print(f"{name} not run: {e}", file=sys.stderr)
        return []
    finally:
        args.iters, args.warmup = saved


def machine():
    return (f"{platform.node()} ({os.cpu_count()} CPUs, {platform.system()} "
            f"{platform.release()}, load average {os.getloadavg()[0]:.1f} at the end)")


META_KEYS = ("reps", "iters", "warmup", "cluster_iters", "cluster_warmup", "gloo_algorithm")


def write_meta(args, links, notes, stamp):
    """What --replot needs besides the raw CSVs."""
    meta = {k: getattr(args, k) for k in META_KEYS}
    meta.update(stamp=stamp, notes=notes, links=links)
    with open(os.path.join(args.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)


def read_back(args):
    """(raw, links, notes, stamp) from the files a run wrote to --out."""
    meta = json.load(open(os.path.join(args.out, "meta.json")))
    for k in META_KEYS:
        setattr(args, k, meta[k])
    raw = []
    for name in ("loopback_raw.csv", "cluster_raw.csv"):
        path = os.path.join(args.out, name)
        if not os.path.exists(path):
            continue
        for r in csv.DictReader(open(path)):
            for k in ("np", "bytes", "count", "wrong", "rep", "hosts"):
                if r.get(k):
                    r[k] = int(r[k])
            for k in ("time_us", "min_us", "algbw_gbs", "busbw_gbs", "max_err", "rate_bps",
                      "measured_bps", "max_us", "first_us"):
                if r.get(k):
                    r[k] = float(r[k])
            raw.append(r)
    return raw, meta["links"], [tuple(n) for n in meta["notes"]], meta["stamp"]


def write_outputs(args, raw, links, notes, stamp):
    order = peers.ORDER
    summary = report.summarize(raw)
    loop = [r for r in raw if r["scenario"] == "loopback"]
    clus = [r for r in raw if r["scenario"] != "loopback"]
    out, sections = args.out, {}
    runs = f"{args.reps} run" + ("s" if args.reps != 1 else "")

    def skipped(cluster):
        lines = [f"\n- {w}: {n}" for w, n in notes if (w != "loopback") == cluster]
        return f"\nNot run:{''.join(lines)}\n" if lines else ""
    if loop:
        report.write_raw(os.path.join(out, "loopback_raw.csv"), loop, [])
        report.write_summary(os.path.join(out, "loopback_summary.csv"), summary, {"loopback"})
        report.plot_loopback(os.path.join(out, "loopback_allreduce.png"), summary, order,
                             args.reps)
        times, ratios = report.loopback_tables(summary, order, args.reps)
        sections["loopback"] = (
            f"{stamp} {runs} x {args.iters} timed iterations (+{args.warmup} warm-up) "
            f"per size. Time per allreduce in ms: median of the runs (min-max); each run's time "
            f"is the median over its iterations of the slowest rank's time. Gloo: "
            f"`--algorithm {args.gloo_algorithm}`.\n\n{times}\nhvdsparse time / peer time "
            f"(ratio of the medians; below 1 hvdsparse is faster):\n\n{ratios}\n"
            f"![loopback allreduce](benchmarks/loopback_allreduce.png)\n"
            + skipped(False))
    if clus or links:
        report.write_raw(os.path.join(out, "cluster_raw.csv"), clus,
                         ["hosts", "rate_bps", "measured_bps"])
        report.write_summary(os.path.join(out, "cluster_summary.csv"), summary, set(links),
                             links)
        with open(os.path.join(out, "linkrate.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["scenario", "hosts", "nominal_bps", "measured_bps"])
            for s, ln in links.items():
                w.writerow([s, ln["hosts"], f"{ln['rate_bps']:.0f}", f"{ln['measured_bps']:.0f}"])
        report.plot_cluster(os.path.join(out, "cluster_allreduce.png"), summary, order, links,
                            args.reps)
        bounds, times, ratios = report.cluster_tables(summary, order, links, args.reps)
        verdict = report.acceptance(summary, links)
        rates = "; ".join(f"{s}: {ln['measured_bps'] / 1e6:.0f} Mbit/s"
                          for s, ln in links.items())
        sections["cluster"] = (
            f"{stamp} {runs} x {args.cluster_iters} timed iterations "
            f"(+{args.cluster_warmup} warm-up) per size, one rank per host. Measured link rate "
            f"(one TCP stream, h0 to h1, goodput): {rates}.\n\n"
            f"Time / link bound, median of {runs}, the bound 2(P-1)/P x bytes / rate "
            f"taken at the nominal rate / at the measured rate (1.00 = the link is the only "
            f"limit):\n\n{bounds}\nTime per allreduce in ms: median of the runs (min-max):\n\n"
            f"{times}\nhvdsparse time / peer time (ratio of the medians; below 1 hvdsparse is "
            f"faster):\n\n{ratios}\n{verdict}\n"
            f"![cluster allreduce](benchmarks/cluster_allreduce.png)\n"
            + skipped(True))
    with open(os.path.join(out, "tables.md"), "w") as f:
        for k, v in sections.items():
            f.write(f"## {k}\n\n{v}\n")
    print(open(os.path.join(out, "tables.md")).read())
    if args.doc:
        if "loopback" in sections:
            report.update_doc(args.doc, *LOOP_MARKS, sections["loopback"])
        if "cluster" in sections:
            report.update_doc(args.doc, *CLUSTER_MARKS, sections["cluster"])
    return summary


def main():
    args = parse_args()
    # SIGTERM unwinds like Ctrl-C, so the process groups started and the cluster go with it.
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
    os.makedirs(args.out, exist_ok=True)
    if args.replot:
        raw, links, notes, stamp = read_back(args)
        write_outputs(args, raw, links, notes, stamp)
        return 0
    raw, links, notes, t0 = [], {}, [], time.monotonic()
    with open(os.path.join(args.out, "runs.log"), "w") as log:
        for name, spec in args.scenario_list:
            if spec is None:
                raw += run_loopback(args, log, notes)
            else:
                raw += run_cluster(name, spec, args, log, notes, links)
    stamp = (f"Generated {datetime.datetime.now():%Y-%m-%d %H:%M} by "
             f"`{' '.join(['python3', 'bench/suite/run.py'] + sys.argv[1:])}` on {machine()}, "
             f"{(time.monotonic() - t0) / 60:.1f} min in all.")
    write_meta(args, links, notes, stamp)
    write_outputs(args, raw, links, notes, stamp)
    errors = sum(1 for r in raw if r["wrong"] != 0)
    if errors:
        print(f"{errors} rows reported wrong results", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
