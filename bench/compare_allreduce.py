#!/usr/bin/env python3
"""Compare hvdsparse's float32 sum allreduce with Gloo's and Open MPI's on this machine.

For each repetition the implementations run round-robin (the order rotates every repetition), each
over the whole size sweep, for every np:
  hvdsparse    bin/hvdsparse run -np N bin/hvdsparse-perf allreduce
  gloo         N local processes of bin/gloo_allreduce_bench (FileStore rendezvous, TCP loopback)
  mpi-tcp      mpirun ... --mca btl tcp,self bin/mpi_allreduce_bench
  mpi-default  mpirun ... bin/mpi_allreduce_bench (Open MPI's defaults: shared memory)
Every tool prints the same CSV rows (--csv). The script reports per (np, size) the median bus
bandwidth over the repetitions and its spread (min-max), the ratios hvdsparse/Gloo and
hvdsparse/MPI-TCP, and writes raw.csv, summary.csv, table.md and allreduce_busbw.png to --out.
With --doc it also rewrites the section of that file between the markers
<!-- allreduce-table:start --> and <!-- allreduce-table:end -->.

Example (from the repository root):
  python3 bench/compare_allreduce.py --build build-bench --out build-bench/compare \
      --np 2,4 --sizes 1M:256M:4 --reps 5 --doc docs/benchmarks.md
"""
import argparse
import csv
import datetime
import os
import platform
import re
import signal
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

IMPLS = ["hvdsparse", "gloo", "mpi-tcp", "mpi-default"]
LABELS = {"hvdsparse": "hvdsparse", "gloo": "Gloo allreduce", "mpi-tcp": "Open MPI TCP",
          "mpi-default": "Open MPI default (shm)"}
MARK_START = "<!-- allreduce-table:start -->"
MARK_END = "<!-- allreduce-table:end -->"
PREFIX = re.compile(r"^\[\d+\]<std(?:out|err)>:")
FIELDS = ["impl", "coll", "np", "bytes", "count", "dtype", "redop", "time_us", "min_us",
          "algbw_gbs", "busbw_gbs", "wrong", "max_err"]


def parse_size(text):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMG]?)B?", text.strip(), re.I)
    if not m:
        raise argparse.ArgumentTypeError(f"bad size {text!r}")
    scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2).upper()]
    return int(float(m.group(1)) * scale)


def parse_sizes(text):
    """'1M:256M:4' (first:last:factor) or a list '1M,4M,16M'."""
    if ":" in text:
        lo, hi, f = text.split(":")
        lo, hi, f = parse_size(lo), parse_size(hi), int(f)
        if f < 2 or lo <= 0:
            raise argparse.ArgumentTypeError("factor must be >= 2 and the first size > 0")
        sizes = []
        while lo <= hi:
            sizes.append(lo)
            lo *= f
        return sizes
    return sorted(parse_size(s) for s in text.split(",") if s)


def human(n):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def sweeps(sizes):
    """Groups the sizes into (first, last, factor) sweeps the tools understand."""
    if len(sizes) == 1:
        return [(sizes[0], sizes[0], 2)]
    f = sizes[1] // sizes[0]
    if f >= 2 and all(b == a * f for a, b in zip(sizes, sizes[1:])):
        return [(sizes[0], sizes[-1], f)]
    return [(s, s, 2) for s in sizes]


def kill_group(proc):
    """Kills the process group this script created for proc (start_new_session=True)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def run_procs(cmds, timeout, env=None):
    """Starts every command in its own session, waits for all; returns (rc, stdout of the first,
    stderr of all) or raises TimeoutError after killing them."""
    outs = [tempfile.TemporaryFile() for _ in cmds]
    errs = [tempfile.TemporaryFile() for _ in cmds]
    procs = [subprocess.Popen(c, stdout=o, stderr=e, start_new_session=True, env=env)
             for c, o, e in zip(cmds, outs, errs)]
    deadline = time.monotonic() + timeout
    try:
        for p in procs:
            left = deadline - time.monotonic()
            p.wait(timeout=max(left, 0.01))
    except subprocess.TimeoutExpired:
        for p in procs:
            kill_group(p)
        raise TimeoutError(f"timed out after {timeout} s: {' '.join(cmds[0])}")
    finally:
        for p in procs:  # also on KeyboardInterrupt
            kill_group(p)
    rc = next((p.returncode for p in procs if p.returncode != 0), 0)
    outs[0].seek(0)
    stdout = outs[0].read().decode(errors="replace")
    stderr = ""
    for e in errs:
        e.seek(0)
        stderr += e.read().decode(errors="replace")
    return rc, stdout, stderr


def parse_rows(stdout):
    rows = []
    for line in stdout.splitlines():
        line = PREFIX.sub("", line).strip()
        if not line or line.startswith("#") or line.startswith("impl,"):
            continue
        vals = next(csv.reader([line]))
        if len(vals) != len(FIELDS):
            continue
        row = dict(zip(FIELDS, vals))
        for k in ("np", "bytes", "count", "wrong"):
            row[k] = int(row[k])
        for k in ("time_us", "min_us", "algbw_gbs", "busbw_gbs", "max_err"):
            row[k] = float(row[k])
        rows.append(row)
    return rows


def command(impl, np, sweep, args, store):
    b = args.build
    lo, hi, f = sweep
    common = ["-b", str(lo), "-e", str(hi), "-f", str(f), "-n", str(args.iters),
              "-w", str(args.warmup), "-c", "1", "--csv", "--label", impl]
    if impl == "hvdsparse":
        return [[os.path.join(b, "bin", "hvdsparse"), "run", "-np", str(np),
                 os.path.join(b, "bin", "hvdsparse-perf"), "allreduce", "-d", "float32",
                 "-o", "sum"] + common]
    if impl == "gloo":
        exe = os.path.join(b, "bin", "gloo_allreduce_bench")
        return [[exe, "--rank", str(r), "--size", str(np), "--store", store,
                 "--algorithm", args.gloo_algorithm] + common for r in range(np)]
    mpi = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(np)]
    if impl == "mpi-tcp":
        mpi += ["--mca", "btl", "tcp,self"]
    return [mpi + [os.path.join(b, "bin", "mpi_allreduce_bench")] + common]


def run_one(impl, np, sweep, args, log):
    store = tempfile.mkdtemp(prefix="gloo-store-")
    cmds = command(impl, np, sweep, args, store)
    log.write("$ " + " ".join(cmds[0]) + (f"  (x{len(cmds)} ranks)" if len(cmds) > 1 else "") + "\n")
    t0 = time.monotonic()
    try:
        rc, out, err = run_procs(cmds, args.timeout)
    except TimeoutError as e:
        log.write(f"TIMEOUT {e}\n")
        print(f"  {impl:12s} np {np}: TIMEOUT", flush=True)
        return []
    finally:
        shutil.rmtree(store, ignore_errors=True)
    log.write(out + err + f"# rc {rc}, {time.monotonic() - t0:.1f} s\n")
    rows = parse_rows(out)
    bad = [r for r in rows if r["wrong"] != 0]
    status = "ok" if rc == 0 and not bad else f"rc {rc}, {len(bad)} rows with errors"
    print(f"  {impl:12s} np {np}: {len(rows)} rows, {time.monotonic() - t0:.1f} s, {status}",
          flush=True)
    return rows


def summarize(raw, impls, nps, sizes):
    """{(np, bytes): {impl: (median, min, max, n)}}."""
    out = {}
    for np in nps:
        for s in sizes:
            cell = {}
            for impl in impls:
                v = [r["busbw_gbs"] for r in raw if r["impl"] == impl and r["np"] == np
                     and r["bytes"] == s]
                if v:
                    cell[impl] = (statistics.median(v), min(v), max(v), len(v))
            out[(np, s)] = cell
    return out


def ratio(cell, a, b):
    if a in cell and b in cell and cell[b][0] > 0:
        return f"{cell[a][0] / cell[b][0]:.2f}"
    return "-"


def markdown(summary, impls, nps, sizes):
    head = ["np", "size"] + [LABELS[i] for i in impls] + ["hvdsparse/Gloo", "hvdsparse/MPI-TCP"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for np in nps:
        for s in sizes:
            cell = summary[(np, s)]
            vals = [f"{cell[i][0]:.2f} ({cell[i][1]:.2f}-{cell[i][2]:.2f})" if i in cell else "-"
                    for i in impls]
            lines.append("| " + " | ".join([str(np), human(s)] + vals +
                                           [ratio(cell, "hvdsparse", "gloo"),
                                            ratio(cell, "hvdsparse", "mpi-tcp")]) + " |")
    return "\n".join(lines) + "\n"


def write_csvs(out, raw, summary, impls):
    with open(os.path.join(out, "raw.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["rep"] + FIELDS)
        w.writeheader()
        w.writerows(raw)
    with open(os.path.join(out, "summary.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["np", "bytes", "impl", "busbw_median_gbs", "busbw_min_gbs", "busbw_max_gbs",
                    "reps"])
        for (np, s), cell in sorted(summary.items()):
            for impl in impls:
                if impl in cell:
                    m, lo, hi, n = cell[impl]
                    w.writerow([np, s, impl, f"{m:.4f}", f"{lo:.4f}", f"{hi:.4f}", n])


def plot(path, summary, impls, nps, sizes):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing (python3 -m pip install matplotlib): no plot", file=sys.stderr)
        return False
    fig, axes = plt.subplots(1, len(nps), figsize=(6 * len(nps), 4.5), squeeze=False)
    for ax, np in zip(axes[0], nps):
        for impl in impls:
            pts = [(s, summary[(np, s)][impl]) for s in sizes if impl in summary[(np, s)]]
            if not pts:
                continue
            xs = [p[0] / (1 << 20) for p in pts]
            med = [p[1][0] for p in pts]
            err = [[p[1][0] - p[1][1] for p in pts], [p[1][2] - p[1][0] for p in pts]]
            ax.errorbar(xs, med, yerr=err, marker="o", capsize=3, label=LABELS[impl])
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (MiB, float32)")
        ax.set_ylabel("bus bandwidth (GB/s), median, bars = min-max")
        ax.set_title(f"allreduce, np {np}, one host")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def update_doc(doc, section):
    text = open(doc).read()
    a, b = text.find(MARK_START), text.find(MARK_END)
    if a < 0 or b < a:
        print(f"{doc}: markers not found, not updated", file=sys.stderr)
        return
    text = text[:a + len(MARK_START)] + "\n" + section + text[b:]
    with open(doc, "w") as f:
        f.write(text)
    print(f"updated {doc}")


def doc_section(args, table, png_rel, elapsed):
    when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    argv = " ".join(["python3", "bench/compare_allreduce.py"] + sys.argv[1:])
    return (f"Generated {when} by `{argv}` on {platform.node()} ({os.cpu_count()} CPUs, "
            f"{platform.system()} {platform.release()}), {args.reps} repetitions x "
            f"{args.iters} timed iterations (+{args.warmup} warm-up) per size, "
            f"{elapsed / 60:.1f} min. Bus bandwidth in GB/s: median over repetitions "
            f"(min-max). Gloo: `--algorithm {args.gloo_algorithm}`.\n\n{table}\n"
            f"![allreduce bus bandwidth]({png_rel})\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build-bench", help="build dir holding bin/")
    p.add_argument("--out", default=None, help="output dir (default BUILD/compare)")
    p.add_argument("--np", default="2,4", help="comma list of process counts")
    p.add_argument("--sizes", default="1M:256M:4", type=parse_sizes,
                   help="first:last:factor or a comma list, bytes with K/M/G")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--iters", type=int, default=10, help="timed iterations per size and run")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--timeout", type=float, default=900, help="seconds per tool invocation")
    p.add_argument("--impls", default=",".join(IMPLS), help="subset of " + ",".join(IMPLS))
    p.add_argument("--gloo-algorithm", default="default")
    p.add_argument("--doc", default=None, help="markdown file whose table section to rewrite")
    p.add_argument("--png-link", default=None, help="plot path as linked from --doc")
    args = p.parse_args()
    args.build = os.path.abspath(args.build)
    args.out = os.path.abspath(args.out or os.path.join(args.build, "compare"))
    nps = [int(x) for x in args.np.split(",")]
    impls = [i for i in args.impls.split(",") if i]
    unknown = set(impls) - set(IMPLS)
    if unknown:
        p.error(f"unknown implementations {sorted(unknown)}")
    os.makedirs(args.out, exist_ok=True)
    raw, t0 = [], time.monotonic()
    with open(os.path.join(args.out, "runs.log"), "w") as log:
        for rep in range(args.reps):
            order = impls[rep % len(impls):] + impls[:rep % len(impls)]
            print(f"repetition {rep + 1}/{args.reps}", flush=True)
            for np in nps:
                for impl in order:
                    for sw in sweeps(args.sizes):
                        for r in run_one(impl, np, sw, args, log):
                            r["impl"], r["rep"] = impl, rep
                            raw.append(r)
                log.flush()
    elapsed = time.monotonic() - t0
    summary = summarize(raw, impls, nps, args.sizes)
    write_csvs(args.out, raw, summary, impls)
    table = markdown(summary, impls, nps, args.sizes)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(table)
    png = os.path.join(args.out, "allreduce_busbw.png")
    plot(png, summary, impls, nps, args.sizes)
    print(table)
    if args.doc:
        link = args.png_link or os.path.relpath(png, os.path.dirname(os.path.abspath(args.doc)))
        update_doc(args.doc, doc_section(args, table, link, elapsed))
    errors = sum(1 for r in raw if r["wrong"] != 0)
    if errors:
        print(f"{errors} rows reported wrong results", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
