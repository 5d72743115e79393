"""TensorFlow GPU tensors through the in-place path (dlpack_views) on a GPU: an allreduce eagerly
and in tf.function, a grouped one, a broadcast, an allgather, a reducescatter, an alltoall,
tf.IndexedSlices and DistributedGradientTape's, each right (exact integer-valued results), with
every input and output seen in GPU memory (none crossed to the host). Run by test/gpu/run.sh
under the launcher where TensorFlow sees the GPU; results to --out/tf_gpu.jsonl."""
import argparse
import json
import os

import numpy as np
import tensorflow as tf

import hvdsparse.tensorflow as hvd
from hvdsparse.tensorflow import dlpack_views

failures = []


def record(out, check, ok, **fields):
    line = dict(check=check, ok=bool(ok), rank=hvd.rank(), size=hvd.size(), **fields)
    if hvd.rank() == 0:
        print("%-16s %s %s" % (check, "passed" if ok else "FAILED", json.dumps(fields)),
              flush=True)
        with open(os.path.join(out, "tf_gpu.jsonl"), "a") as f:
            f.write(json.dumps(line) + "\n")
    if not ok:
        failures.append(check)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    hvd.init()
    os.makedirs(args.out, exist_ok=True)
    devices = []
    real = dlpack_views.View

    def view(tensor, c_dtype):
        v = real(tensor, c_dtype)
        devices.append(v.device)
        return v
    dlpack_views.View = view
    n, r = hvd.size(), hvd.rank()
    with tf.device("/GPU:0"):
        x = tf.cast(tf.range(1 << 20) % 7 + r, tf.float32)
        w = tf.Variable(tf.ones([4], tf.float64))
    want = sum((np.arange(1 << 20) % 7 + q) for q in range(n)).astype(np.float32)
    got = hvd.allreduce(x, op=hvd.Sum, name="tf.eager")
    record(args.out, "eager", np.array_equal(got.numpy(), want) and "GPU" in got.device,
           views_on_gpu=devices.count(0), views=len(devices))
    got = tf.function(lambda t: hvd.allreduce(t, op=hvd.Sum, name="tf.graph"))(x)
    record(args.out, "tf.function", np.array_equal(got.numpy(), want), views=len(devices))
    g = hvd.grouped_allreduce([x, x * 2], op=hvd.Sum, name="tf.grouped")
    record(args.out, "grouped", np.array_equal(g[1].numpy(), want * 2), views=len(devices))

    b = hvd.broadcast(x, root_rank=n - 1, name="tf.broadcast")
    record(args.out, "broadcast", np.array_equal(b.numpy(), (np.arange(1 << 20) % 7 + n - 1)
                                                 .astype(np.float32)), views=len(devices))

    with tf.device("/GPU:0"):
        rows = tf.fill([r + 1, 4], float(r))
    ag = hvd.allgather(rows, name="tf.allgather")
    ag_want = np.concatenate([np.full([q + 1, 4], float(q)) for q in range(n)])
    record(args.out, "allgather", np.array_equal(ag.numpy(), ag_want) and "GPU" in ag.device,
           views=len(devices))
    rs = hvd.reducescatter(x, op=hvd.Sum, name="tf.reducescatter")
    record(args.out, "reducescatter", np.array_equal(rs.numpy(), want[:rs.shape[0]])
           if r == 0 else rs.shape[0] > 0, views=len(devices))
    a2a, received = hvd.alltoall(x, splits=[x.shape[0] // n] * (n - 1)
                                 + [x.shape[0] - (n - 1) * (x.shape[0] // n)], name="tf.alltoall")
    record(args.out, "alltoall", int(np.sum(received.numpy())) == a2a.shape[0],
           views=len(devices))

    with tf.device("/GPU:0"):
        sl = tf.IndexedSlices(tf.ones([3, 4]) * (r + 1), tf.constant([0, 2, 2], tf.int64),
                              dense_shape=tf.constant([5, 4], tf.int64))
    red = hvd.allreduce(sl, op=hvd.Sum, name="tf.slices")
    dense = tf.math.unsorted_segment_sum(red.values, red.indices, 5).numpy()
    total = sum(q + 1 for q in range(n))
    want_s = np.zeros([5, 4], np.float32)
    want_s[0], want_s[2] = total, 2 * total
    record(args.out, "indexed_slices", np.array_equal(dense, want_s), views=len(devices),
           rows=int(red.indices.shape[0]))

    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(w * w) * float(r + 1)
        return hvd.DistributedGradientTape(tape).gradient(loss, [w])[0]
    grad = tf.function(step)()
    mean = np.mean([q + 1 for q in range(n)])
    record(args.out, "gradient_tape", np.allclose(grad.numpy(), 2 * mean), views=len(devices))
    record(args.out, "in_place", devices and all(d == 0 for d in devices),
           views=len(devices), devices=sorted(set(devices)))
    hvd.shutdown()
    raise SystemExit(len(failures))


if __name__ == "__main__":
    main()
