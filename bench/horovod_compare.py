#!/usr/bin/env python3
"""Horovod itself against hvdsparse, training: the same script (it imports horovod.torch) run
under Horovod 0.28.1 (its Gloo controller, the Python that bench/peers/build_horovod.sh builds)
and under hvdsparse's Horovod alias (build/bin/horovodrun), alternating, --reps times, on this
host and on a namespace cluster with shaped links (root). Prints samples/s per run, the medians,
the spread and hvdsparse / Horovod.

  python3 bench/horovod_compare.py --build build --horovod-python "$(bench/peers/build_horovod.sh)"
  sudo python3 bench/horovod_compare.py --places 4x1gbit --workloads embedding ...

Workloads (frameworks/*/examples, with --horovod):
  synthetic   pytorch_synthetic_benchmark.py --model mlp: dense gradients, DistributedOptimizer
  embedding   train_embedding.py --sync sparse: a 2^20 x 16 table with sparse gradients (Horovod
              allgathers them; hvdsparse runs its sparse allreduce)
  keras       keras_synthetic_train.py: TensorFlow Keras fit with horovod.tensorflow.keras's
              DistributedOptimizer and callbacks, tf_keras on both sides (Horovod 0.28.1 predates
              Keras 3); Horovod's side runs in the Python `build_horovod.sh tensorflow` prints
              (--horovod-tf-python)
Places: loopback np N ("np2", "np4"; the ranks share this machine's cores) and HxRATE (one rank
per namespace host).
"""
import argparse
import os
import re
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "suite"))
import peers  # noqa: E402
from cluster import Cluster  # noqa: E402
from common import run_procs, torch_worker_env  # noqa: E402

EXAMPLES = {fw: os.path.join(ROOT, "frameworks", fw, "examples") for fw in ("pytorch", "tensorflow")}
# name: (framework, script and flags, what the script prints per epoch or run)
WORKLOADS = {
    "synthetic": ("pytorch", ["pytorch_synthetic_benchmark.py", "--model", "mlp", "--batch-size", "32",
                   "--num-warmup-batches", "5", "--num-batches-per-iter", "5", "--num-iters", "5"],
                  r"Total img/sec on \d+ CPU\(s\): ([\d.]+)"),
    "embedding": ("pytorch", ["train_embedding.py", "--sync", "sparse", "--epochs", "4",
                   "--steps-per-epoch", "10"], r"epoch (?:[2-9]|\d\d+): .*?, (\d+) samples/s"),
    "keras": ("tensorflow", ["keras_synthetic_train.py", "--epochs", "5", "--global-batch", "64"],
              r"samples/s: ([\d.]+)"),
}
# One thread per rank for either framework, as on the hvdsparse side of every comparison.
ONE_THREAD = {"OMP_NUM_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1",
              "TF_CPP_MIN_LOG_LEVEL": "3"}


def samples_per_s(out, pattern):
    """The run's figure: the mean over what the workload printed (epochs after the first)."""
    values = [float(v) for v in re.findall(pattern, out)]
    return statistics.mean(values) if values else None


def hvdsparse_cmd(args, place, script):
    cl = getattr(place, "cluster", None)
    cmd = [os.path.join(args.build, "bin", "horovodrun"), "-np", str(place.np)]
    cmd += cl.launcher_flags() if cl else []
    env = dict(torch_worker_env(args.build), **ONE_THREAD)
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, "frameworks", "tensorflow"),
                                         env["PYTHONPATH"]])
    return [cmd + [sys.executable] + script], [env]


def horovod_cmds(args, place, script, scratch, python):
    cl = getattr(place, "cluster", None)
    env = peers.horovod_env(place, cl.iface if cl else "lo", scratch)
    env.update(ONE_THREAD)
    cmds, envs = [], []
    for r in range(place.np):
        e = dict(env, HOROVOD_RANK=str(r), HOROVOD_CROSS_RANK=str(r if cl else 0),
                 HOROVOD_LOCAL_RANK=str(0 if cl else r),
                 HOROVOD_HOSTNAME=cl.hosts[r] if cl else "localhost")
        cmd = [python] + script
        c, pe = place.rank_cmd(r, peers.as_named_host(cl.addrs[r], cmd) if cl else cmd, e)
        cmds.append(c)
        envs.append(pe)
    return cmds, envs


def horovod_python(args, workload):
    return args.horovod_tf_python if WORKLOADS[workload][0] == "tensorflow" else args.horovod_python


def one_run(impl, args, place, workload):
    framework, argv, pattern = WORKLOADS[workload]
    script = [os.path.join(EXAMPLES[framework], argv[0])] + argv[1:] + ["--horovod"]
    with tempfile.TemporaryDirectory() as scratch:
        rdv = None
        if impl == "horovod":
            rdv = peers.start_horovod_rendezvous(place, args, scratch)
            cmds, envs = horovod_cmds(args, place, script, scratch,
                                      horovod_python(args, workload))
        else:
            cmds, envs = hvdsparse_cmd(args, place, script)
        try:
            rc, out, err = run_procs(cmds, args.timeout, envs)
        except TimeoutError as e:
            return None, str(e)
        finally:
            if rdv:
                peers.stop(rdv)
    value = samples_per_s(out, pattern)
    if rc != 0 or value is None:
        return None, "exit %d: %s" % (rc, (err or out)[-400:])
    return value, ""


def measure(args, place, results):
    for workload in args.workloads.split(","):
        if not horovod_python(args, workload):
            print("%s %s: not run, Horovod's TensorFlow part needs --horovod-tf-python" %
                  (place.name, workload), flush=True)
            continue
        runs = {"hvdsparse": [], "horovod": []}
        for rep in range(args.reps):
            order = ["hvdsparse", "horovod"] if rep % 2 == 0 else ["horovod", "hvdsparse"]
            for impl in order:
                value, why = one_run(impl, args, place, workload)
                print("%s %s %s run %d: %s" % (place.name, workload, impl, rep + 1,
                                               "%.0f samples/s" % value if value else why),
                      flush=True)
                if value:
                    runs[impl].append(value)
        results.append((place.name, workload, runs))


def report(results):
    print("\n| place | workload | hvdsparse samples/s | Horovod samples/s | hvdsparse / Horovod |")
    print("|---|---|---|---|---|")
    for place, workload, runs in results:
        cells = []
        for impl in ("hvdsparse", "horovod"):
            v = runs[impl]
            cells.append("%.0f (%.0f-%.0f)" % (statistics.median(v), min(v), max(v)) if v else
                         "failed")
        ratio = (statistics.median(runs["hvdsparse"]) / statistics.median(runs["horovod"])
                 if runs["hvdsparse"] and runs["horovod"] else float("nan"))
        print("| %s | %s | %s | %s | %.2fx |" % (place, workload, cells[0], cells[1], ratio))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 1)[1])
    p.add_argument("--build", default="build")
    p.add_argument("--horovod-python", required=True,
                   help="a Python that imports horovod.torch (bench/peers/build_horovod.sh)")
    p.add_argument("--horovod-tf-python", default=None,
                   help="a Python that imports horovod.tensorflow, for the keras workload "
                        "(bench/peers/build_horovod.sh tensorflow)")
    p.add_argument("--places", default="np2,np4")
    p.add_argument("--workloads", default="synthetic,embedding")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--timeout", type=float, default=600)
    args = p.parse_args()
    args.build = os.path.abspath(args.build)
    results = []
    for name in args.places.split(","):
        if name.startswith("np"):
            measure(args, peers.Loopback(int(name[2:])), results)
            continue
        hosts, rate = name.split("x", 1)
        with Cluster(int(hosts), rate, "hhc%d-" % os.getpid()) as cl:
            measure(args, peers.OnCluster(cl, "%s hosts x %s" % (hosts, rate)), results)
    report(results)


if __name__ == "__main__":
    main()
