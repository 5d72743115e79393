"""Dense against top-k (and top-k + quantization) training of the example language model.

Runs frameworks/pytorch/examples/train_lm_topk.py once per configuration and repetition, the
configurations interleaved (none, topk, topk+bits, none, ...) so that a change in the machine's
load hits them alike, and prints per configuration the median ms/step (spread in brackets), the
median time waiting for the allreduces, the final loss, the loss gap to dense and the speed-up
over dense, then each configuration against the one before it, repetition by repetition. Needs
root for --cluster (namespace hosts with shaped links, one rank each):

    python3 bench/topk_compare.py --cluster 4x1gbit --reps 3 -- --steps 200 --batch-size 4

or on this host: python3 bench/topk_compare.py --np 4 -- --steps 50

Arguments after -- go to train_lm_topk.py unchanged (model size, batch, steps, ratio).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXAMPLE = os.path.join(ROOT, "frameworks", "pytorch", "examples", "train_lm_topk.py")
FINAL = re.compile(r"final: loss ([0-9.]+) .*?, ([0-9.]+) ms/step")
STEP = re.compile(r"step \d+: loss [0-9.]+, [0-9.]+ ms/step \(([0-9.]+) waiting")


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cluster", help="HxRATE: H namespace hosts with links of RATE (root)")
    p.add_argument("--np", type=int, default=4, help="ranks on this host (without --cluster)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--configs", default="none,topk,topk4",
                   help="comma-separated: none, topk, topk4 (top-k + 4-bit quantization), "
                   "topk-dsar, topk4-dsar (DSAR forced), topk-unpacked (full-width indices "
                   "in the gathers: HVDSPARSE_SPARSE_PACK_INDICES=0)")
    p.add_argument("--launcher", default=os.path.join(ROOT, "build", "bin", "hvdsparse"))
    p.add_argument("--keep-freed-memory", action="store_true",
                   help="run every configuration with the launcher's --keep-freed-memory")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per training run")
    p.add_argument("example_args", nargs="*", help="after --: train_lm_topk.py's arguments")
    return p.parse_args()


def config_args(name):
    args = ["--compression", "none"] if name == "none" else ["--compression", "topk"]
    if name.startswith("topk4"):
        args += ["--quantize-bits", "4"]
    if name.endswith("-dsar"):
        args += ["--sparse-algorithm", "dsar_split_allgather"]
    return args


def config_env(name):
    """Launcher flags that set a configuration's environment."""
    return ["-x", "HVDSPARSE_SPARSE_PACK_INDICES=0"] if name.endswith("-unpacked") else []


def run_once(args, launch, name):
    """(final loss, ms/step, mean ms waiting) of one training run."""
    cmd = (launch + config_env(name) + [sys.executable, EXAMPLE] + config_args(name) +
           args.example_args)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    out = p.stdout + p.stderr
    final = FINAL.search(out)
    if p.returncode != 0 or not final:
        raise SystemExit("%s failed (exit %d):\n%s" % (name, p.returncode, out[-3000:]))
    waits = [float(w) for w in STEP.findall(out)]
    return float(final.group(1)), float(final.group(2)), statistics.mean(waits) if waits else 0.0


def spread(xs):
    return "%.0f (%.0f-%.0f)" % (statistics.median(xs), min(xs), max(xs))


def report(results, configs):
    base = results.get("none")
    base_ms = statistics.median(r[1] for r in base) if base else None
    base_loss = statistics.median(r[0] for r in base) if base else None
    print("config,ms_per_step,wait_ms,final_loss,loss_vs_dense,speedup_vs_dense")
    for name in configs:
        rs = results[name]
        ms = statistics.median(r[1] for r in rs)
        loss = statistics.median(r[0] for r in rs)
        gap = "%+.2f%%" % (100 * (loss / base_loss - 1)) if base_loss else ""
        speed = "%.2fx" % (base_ms / ms) if base_ms else ""
        print("%s,%s,%s,%.4f,%s,%s" % (name, spread([r[1] for r in rs]),
                                       spread([r[2] for r in rs]), loss, gap, speed), flush=True)
    paired(results, configs)


def paired(results, configs):
    """Each repetition runs the configurations back to back, so the ratio of two of them within
    a repetition cancels the machine's slower drifts: per pair of neighbouring configurations,
    the median per-repetition speed-up, its range, and in how many repetitions the second was
    faster."""
    for a, b in zip(configs, configs[1:]):
        ratios = [ra[1] / rb[1] for ra, rb in zip(results[a], results[b])]
        if not ratios:
            continue
        wins = sum(r > 1 for r in ratios)
        print("# paired: %s is %.3fx as fast as %s per repetition (median; %.3f-%.3f), faster "
              "in %d of %d" % (b, statistics.median(ratios), a, min(ratios), max(ratios), wins,
                               len(ratios)), flush=True)


def main():
    args = parse()
    configs = args.configs.split(",")
    results = {c: [] for c in configs}

    def sweep(launch):
        for rep in range(args.reps):
            for name in configs:
                loss, ms, wait = run_once(args, launch, name)
                results[name].append((loss, ms, wait))
                print("# rep %d %s: loss %.4f, %.1f ms/step, %.1f ms waiting" %
                      (rep + 1, name, loss, ms, wait), flush=True)

    env_fwd = ["-x", "PYTHONPATH"] if "PYTHONPATH" in os.environ else []
    if args.keep_freed_memory:
        env_fwd.append("--keep-freed-memory")
    if args.cluster:
        sys.path.insert(0, os.path.join(HERE, "suite"))
        from cluster import Cluster
        hosts, rate = args.cluster.split("x", 1)
        with Cluster(int(hosts), rate, "tkx-") as c:
            print("# %s hosts at %s" % (hosts, rate), flush=True)
            sweep([args.launcher, "run", "-np", hosts] + c.launcher_flags() + env_fwd)
    else:
        sweep([args.launcher, "run", "-np", str(args.np)] + env_fwd)
    report(results, configs)


if __name__ == "__main__":
    main()
