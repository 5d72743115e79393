"""Keras training on synthetic regression data with hvdsparse.tensorflow.keras.

    hvdsparse run -np 2 python3 keras_synthetic_train.py --global-batch 64

Every rank trains on its slice of each global batch; with the same --global-batch the final
loss matches a single-process run.

--horovod imports horovod.tensorflow.keras instead and trains with tf.keras under
TF_USE_LEGACY_KERAS=1 (tf_keras), to run the same script under Horovod 0.28.1 itself (which
predates Keras 3) or under hvdsparse's Horovod alias (horovodrun)."""
import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
if "--horovod" in sys.argv:
    os.environ["TF_USE_LEGACY_KERAS"] = "1"

import numpy as np  # noqa: E402

if "--horovod" in sys.argv:
    import tensorflow as tf  # noqa: E402

    import horovod.tensorflow.keras as hvd  # noqa: E402
    keras = tf.keras
else:
    import keras  # noqa: E402

    import hvdsparse.tensorflow.keras as hvd  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--global-batch", type=int, default=64)
p.add_argument("--epochs", type=int, default=5)
p.add_argument("--samples", type=int, default=4096)
p.add_argument("--lr", type=float, default=0.05)
p.add_argument("--horovod", action="store_true", help="import horovod.tensorflow.keras (see above)")
p.add_argument("--warmup-epochs", type=int, default=0,
               help="LearningRateWarmupCallback epochs (0: off; it ramps from lr/size, so a "
                    "run with warmup differs from a single-process run by design)")
args = p.parse_args()

hvd.init()
n, r = hvd.size(), hvd.rank()
assert args.global_batch % n == 0, "global batch must divide by the number of ranks"
per = args.global_batch // n

rng = np.random.RandomState(0)
x = rng.randn(args.samples, 32).astype(np.float32)
w = rng.randn(32, 1).astype(np.float32)
y = np.tanh(x @ w) + 0.1 * rng.randn(args.samples, 1).astype(np.float32)
# rank r takes its slice of every global batch, so the union of one step's batches is the
# global batch of a single-process run
steps = args.samples // args.global_batch
idx = np.concatenate([np.arange(s * args.global_batch + r * per,
                                s * args.global_batch + (r + 1) * per) for s in range(steps)])

keras.utils.set_random_seed(1)
model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(64, activation="relu"),
                          keras.layers.Dense(1)])
model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(args.lr)), loss="mse")
callbacks = [hvd.callbacks.BroadcastGlobalVariablesCallback(0),
             hvd.callbacks.MetricAverageCallback()]
if args.warmup_epochs:
    callbacks.append(hvd.callbacks.LearningRateWarmupCallback(args.lr, args.warmup_epochs))
start = time.time()
hist = model.fit(x[idx], y[idx], batch_size=per, epochs=args.epochs, shuffle=False,
                 callbacks=callbacks, verbose=0)
elapsed = time.time() - start
final = float(model.evaluate(x, y, batch_size=1024, verbose=0))
if r == 0:
    for e, loss in enumerate(hist.history["loss"]):
        print("epoch %d: train loss %.6f" % (e + 1, loss))
    print("final loss (full data): %.6f" % final)
    print("samples/s: %.1f on %d rank(s)" % (steps * args.global_batch * args.epochs / elapsed, n))
