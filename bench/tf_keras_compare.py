"""hvdsparse Keras example vs tf.distribute MultiWorkerMirroredStrategy, same model and data.

One invocation runs, alternating, --reps times each:
  * hvdsparse: frameworks/tensorflow/examples/keras_synthetic_train.py at --np 2 through the
    launcher (samples/s and final loss parsed from rank 0's output, the example is unchanged);
  * MWMS: two worker processes on 127.0.0.1 (TF_CONFIG, two free ports), RING (gRPC/CPU)
    collectives, the same model (Dense 64 relu -> Dense 1, seed 1), data (RandomState(0),
    --samples x 32), SGD(--lr), MSE, per-worker batch = per-rank batch, and each worker given
    exactly the rows the example gives the same rank (its slice of every global batch; no
    auto-sharding: the dataset comes from distribute_datasets_from_function);
and prints the median samples/s of each, the ratio hvdsparse/MWMS and both final losses.

    python3 bench/tf_keras_compare.py --epochs 4 --global-batch 64 --reps 3

Threads: every process (both sides) gets TF_NUM_INTRAOP_THREADS=1, TF_NUM_INTEROP_THREADS=1,
OMP_NUM_THREADS=1 (the MWMS worker also sets tf.config.threading to 1/1 explicitly), and
TF_CPP_MIN_LOG_LEVEL=2.

Timing: the example's samples/s covers every epoch including the first (tracing, broadcast).
For MWMS two figures are taken on worker 0: "steady" (epochs 2..E, from the start of epoch 2 to
the end of the last, over the global batch; the headline MWMS figure) and "all" (the whole fit,
timed as the example times it).  Both ratios are printed; the like-for-like one is hvd/MWMS-all.
"""
import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXAMPLE = os.path.join(ROOT, "frameworks", "tensorflow", "examples", "keras_synthetic_train.py")
NP = 2


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--launcher", default=os.path.join(ROOT, "build", "bin", "hvdsparse"))
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--global-batch", type=int, default=64, help="per-rank batch = this / 2")
    p.add_argument("--samples", type=int, default=4096)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--timeout", type=float, default=300, help="seconds per run (each side)")
    p.add_argument("--mwms-worker", type=int, help=argparse.SUPPRESS)
    return p.parse_args()


def thread_env():
    env = dict(os.environ)
    env.update(TF_CPP_MIN_LOG_LEVEL="2", TF_NUM_INTRAOP_THREADS="1",
               TF_NUM_INTEROP_THREADS="1", OMP_NUM_THREADS="1",
               TF_ENABLE_ONEDNN_OPTS="0")  # the example sets this too (setdefault)
    return env


# --------------------------------------------------------------------------- process control

def _descendants(pid):
    """pids of every live descendant of pid (walks /proc), so a launcher's workers are reached
    even if they left its process group."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def kill_tree(proc):
    """SIGTERM then SIGKILL to the process group this script created for proc, and to proc's
    descendants (only processes started here)."""
    pids = _descendants(proc.pid)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            pass


def run_group(cmds, envs, timeout):
    """Start every command in its own session; wait for all of them up to timeout.
    Returns (list of (rc, output), timed_out)."""
    procs = [subprocess.Popen(c, env=e, cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True)
             for c, e in zip(cmds, envs)]
    deadline = time.time() + timeout
    results, timed_out = [], False
    try:
        for p in procs:
            try:
                out, _ = p.communicate(timeout=max(1.0, deadline - time.time()))
                results.append((p.returncode, out))
            except subprocess.TimeoutExpired:
                timed_out = True
                kill_tree(p)
                out, _ = p.communicate()
                results.append((None, out))
    finally:
        for p in procs:
            if p.poll() is None:
                kill_tree(p)
            else:
                kill_tree(p)  # stray descendants of a finished process, if any
    return results, timed_out


def free_ports(n):
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


# --------------------------------------------------------------------------- hvdsparse side

def run_hvd(args):
    cmd = [args.launcher, "run", "-np", str(NP), sys.executable, EXAMPLE,
           "--epochs", str(args.epochs), "--global-batch", str(args.global_batch),
           "--samples", str(args.samples), "--lr", str(args.lr)]
    (res,), timed_out = run_group([cmd], [thread_env()], args.timeout)
    rc, out = res
    sps = re.search(r"^\[0\]<stdout>:samples/s: ([0-9.]+) on (\d+) rank", out, re.M)
    loss = re.search(r"^\[0\]<stdout>:final loss \(full data\): ([0-9.eE+-]+|nan|inf)", out, re.M)
    if timed_out or rc != 0 or not sps or not loss:
        raise RuntimeError("hvdsparse run failed (rc=%s, timed_out=%s):\n%s"
                           % (rc, timed_out, out[-3000:]))
    assert int(sps.group(2)) == NP, out
    return float(sps.group(1)), float(loss.group(1))


# --------------------------------------------------------------------------- MWMS side

def data(samples):
    """The example's synthetic data, same seed and shapes."""
    import numpy as np
    rng = np.random.RandomState(0)
    x = rng.randn(samples, 32).astype(np.float32)
    w = rng.randn(32, 1).astype(np.float32)
    y = np.tanh(x @ w) + 0.1 * rng.randn(samples, 1).astype(np.float32)
    return x, y


def rank_rows(r, n, global_batch, samples):
    """Rows the example gives rank r: its slice of every global batch."""
    import numpy as np
    per = global_batch // n
    steps = samples // global_batch
    return np.concatenate([np.arange(s * global_batch + r * per, s * global_batch + (r + 1) * per)
                           for s in range(steps)])


def mwms_worker(args):
    import numpy as np
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import keras
    from keras.src.backend.tensorflow import trainer as ktr

    # Keras 3.15 fit() under MWMS also fails in its first step: reduce_per_replica reduces the
    # scalar step logs with strategy.reduce("MEAN", v, axis=0) ("Invalid reduction dimension 0
    # for input with 0 dimensions").  Only the logged loss goes through it (gradients are
    # all-reduced by the optimizer), so reduce those scalars with axis=None (mean over replicas).
    orig_reduce = ktr.reduce_per_replica

    def reduce_per_replica(values, strategy, reduction):
        if reduction in ("auto", "mean") and ktr._collective_all_reduce_multi_worker(strategy):
            return tf.nest.map_structure(
                lambda v: strategy.reduce("MEAN", v, axis=None if v.shape.rank == 0 else 0),
                values)
        return orig_reduce(values, strategy, reduction)
    ktr.reduce_per_replica = reduce_per_replica

    comm = tf.distribute.experimental.CommunicationOptions(
        implementation=tf.distribute.experimental.CommunicationImplementation.RING)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=comm)
    n = strategy.num_replicas_in_sync
    assert n == NP, n
    per = args.global_batch // n
    steps = args.samples // args.global_batch
    x, y = data(args.samples)

    def dataset_fn(ctx):
        # one replica per worker: input pipeline id == worker index == the example's rank
        assert ctx.get_per_replica_batch_size(args.global_batch) == per
        idx = rank_rows(ctx.input_pipeline_id, ctx.num_input_pipelines, args.global_batch,
                        args.samples)
        return tf.data.Dataset.from_tensor_slices((x[idx], y[idx])).batch(per).repeat()

    dist_ds = strategy.distribute_datasets_from_function(dataset_fn)

    keras.utils.set_random_seed(1)
    with strategy.scope():
        model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(64, activation="relu"),
                                  keras.layers.Dense(1)])
        model.compile(optimizer=keras.optimizers.SGD(args.lr), loss="mse")
        # Keras 3.15 fit() under MWMS fails before the first step: _maybe_symbolic_build
        # reduces the first (x, y) batch with strategy.reduce("MEAN", <tuple of PerReplica>),
        # which CollectiveAllReduceStrategy rejects ("Attempt to convert a value (PerReplica
        # ...) to a Tensor").  That build only needs shapes, so do it here from a local batch
        # and skip the hook; training itself is unchanged.
        model._symbolic_build(data_batch=(x[:per], y[:per]))
        model._maybe_symbolic_build = lambda *a, **k: None

    class Times(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.begin, self.end = {}, {}

        def on_epoch_begin(self, epoch, logs=None):
            self.begin[epoch] = time.time()

        def on_epoch_end(self, epoch, logs=None):
            self.end[epoch] = time.time()

    times = Times()
    start = time.time()
    hist = model.fit(dist_ds, epochs=args.epochs, steps_per_epoch=steps, callbacks=[times],
                     shuffle=False, verbose=0)
    elapsed_all = time.time() - start
    e = args.epochs
    steady = (times.end[e - 1] - times.begin[1]) if e > 1 else float("nan")
    # final loss on the full data, computed from the (replicated) weights like evaluate would
    w1, b1, w2, b2 = [np.asarray(v) for v in model.get_weights()]
    pred = np.maximum(x @ w1 + b1, 0.0) @ w2 + b2
    final = float(np.mean((pred - y) ** 2))
    if args.mwms_worker == 0:
        print("MWMS_RESULT " + json.dumps({
            "sps_steady": (e - 1) * steps * args.global_batch / steady if e > 1 else None,
            "sps_all": e * steps * args.global_batch / elapsed_all,
            "final_loss": final, "losses": [float(v) for v in hist.history["loss"]]}),
            flush=True)


def run_mwms(args):
    ports = free_ports(NP)
    cluster = {"worker": ["127.0.0.1:%d" % p for p in ports]}
    cmds, envs = [], []
    for i in range(NP):
        env = thread_env()
        env["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})
        env.pop("CUDA_VISIBLE_DEVICES", None)
        cmds.append([sys.executable, os.path.abspath(__file__), "--mwms-worker", str(i),
                     "--epochs", str(args.epochs), "--global-batch", str(args.global_batch),
                     "--samples", str(args.samples), "--lr", str(args.lr)])
        envs.append(env)
    results, timed_out = run_group(cmds, envs, args.timeout)
    rc0, out0 = results[0]
    m = re.search(r"^MWMS_RESULT (.*)$", out0, re.M)
    if timed_out or not m or any(rc != 0 for rc, _ in results):
        raise RuntimeError("MWMS run failed (rcs=%s, timed_out=%s):\n%s" % (
            [rc for rc, _ in results], timed_out,
            "\n".join("--- worker %d:\n%s" % (i, o[-3000:]) for i, (_, o) in enumerate(results))))
    return json.loads(m.group(1))


# --------------------------------------------------------------------------- driver

def main():
    args = parse()
    if args.mwms_worker is not None:
        mwms_worker(args)
        return
    assert args.global_batch % NP == 0
    assert args.epochs >= 2, "need one warm-up epoch and at least one timed epoch"
    print("np=%d epochs=%d global batch=%d (per rank/worker %d) samples=%d lr=%g reps=%d; "
          "1 intra-op / 1 inter-op thread per process"
          % (NP, args.epochs, args.global_batch, args.global_batch // NP, args.samples, args.lr,
             args.reps), flush=True)
    hvd, mw = [], []
    for rep in range(args.reps):
        order = [("hvd", run_hvd), ("mwms", run_mwms)]
        if rep % 2:
            order.reverse()
        for name, fn in order:
            t = time.time()
            r = fn(args)
            if name == "hvd":
                hvd.append(r)
                print("rep %d hvdsparse: %.1f samples/s (all epochs), final loss %.6f  [%.1fs]"
                      % (rep, r[0], r[1], time.time() - t), flush=True)
            else:
                mw.append(r)
                print("rep %d MWMS:      %.1f samples/s (epochs 2..%d), %.1f (all epochs), "
                      "final loss %.6f  [%.1fs]" % (rep, r["sps_steady"], args.epochs,
                                                    r["sps_all"], r["final_loss"],
                                                    time.time() - t), flush=True)
    h_sps = statistics.median(s for s, _ in hvd)
    m_steady = statistics.median(r["sps_steady"] for r in mw)
    m_all = statistics.median(r["sps_all"] for r in mw)
    print("median samples/s  hvdsparse (all epochs, as the example reports): %.1f" % h_sps)
    print("median samples/s  MWMS RING (epochs 2..%d, warm):                 %.1f"
          % (args.epochs, m_steady))
    print("median samples/s  MWMS RING (all epochs, like the example):       %.1f" % m_all)
    print("ratio hvdsparse/MWMS: %.3f (vs MWMS warm), %.3f (like-for-like, all epochs)"
          % (h_sps / m_steady, h_sps / m_all))
    print("final loss (full data)  hvdsparse: %.6f   MWMS: %.6f"
          % (hvd[-1][1], mw[-1]["final_loss"]))


if __name__ == "__main__":
    main()
