"""TensorFlow 2 synthetic benchmark with Horovod's output lines (DistributedGradientTape).

    hvdsparse run -np 2 python3 tensorflow2_synthetic_benchmark.py --model ResNet50
"""
import argparse
import os
import timeit

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import hvdsparse.tensorflow as hvd  # noqa: E402

p = argparse.ArgumentParser(description="TensorFlow Synthetic Benchmark")
p.add_argument("--fp16-allreduce", action="store_true", default=False)
p.add_argument("--model", type=str, default="ResNet50", help="a keras.applications name")
p.add_argument("--batch-size", type=int, default=32)
p.add_argument("--image-size", type=int, default=224)
p.add_argument("--num-warmup-batches", type=int, default=10)
p.add_argument("--num-batches-per-iter", type=int, default=10)
p.add_argument("--num-iters", type=int, default=10)
p.add_argument("--no-cuda", action="store_true", default=False)
args = p.parse_args()

hvd.init()
device = "GPU" if tf.config.list_physical_devices("GPU") and not args.no_cuda else "CPU"

model = getattr(tf.keras.applications, args.model)(
    weights=None, input_shape=(args.image_size, args.image_size, 3))
opt = tf.keras.optimizers.SGD(0.01 * hvd.size())
compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
data = tf.random.uniform([args.batch_size, args.image_size, args.image_size, 3])
target = tf.random.uniform([args.batch_size, 1], minval=0, maxval=999, dtype=tf.int64)
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy()


@tf.function
def benchmark_step(first_batch):
    with tf.GradientTape() as tape:
        loss = loss_fn(target, model(data, training=True))
    tape = hvd.DistributedGradientTape(tape, compression=compression)
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    if first_batch:
        hvd.broadcast_variables(model.variables, root_rank=0)
        hvd.broadcast_variables(opt.variables, root_rank=0)


def log(s):
    if hvd.rank() == 0:
        print(s, flush=True)


log("Model: %s" % args.model)
log("Batch size: %d" % args.batch_size)
log("Number of %ss: %d" % (device, hvd.size()))
benchmark_step(first_batch=True)
log("Running warmup...")
timeit.timeit(lambda: benchmark_step(first_batch=False), number=args.num_warmup_batches)
log("Running benchmark...")
img_secs = []
for x in range(args.num_iters):
    t = timeit.timeit(lambda: benchmark_step(first_batch=False),
                      number=args.num_batches_per_iter)
    img_sec = args.batch_size * args.num_batches_per_iter / t
    log("Iter #%d: %.1f img/sec per %s" % (x, img_sec, device))
    img_secs.append(img_sec)
img_sec_mean = np.mean(img_secs)
img_sec_conf = 1.96 * np.std(img_secs)
log("Img/sec per %s: %.1f +-%.1f" % (device, img_sec_mean, img_sec_conf))
log("Total img/sec on %d %s(s): %.1f +-%.1f" % (hvd.size(), device, hvd.size() * img_sec_mean,
                                               hvd.size() * img_sec_conf))
