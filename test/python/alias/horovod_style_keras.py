"""A Keras training script written against Horovod's API and nothing else: under
`hvdsparse run --horovod-alias`, horovod.tensorflow.keras, horovod.keras and
horovod.tensorflow must load hvdsparse and train, with tf.keras being tf_keras
(TF_USE_LEGACY_KERAS=1) or Keras 3. Exits non-zero on any mismatch."""
import os
import tempfile

import numpy as np
import tensorflow as tf

import horovod.keras as hvd_keras
import horovod.tensorflow as hvd_tf
import horovod.tensorflow.keras as hvd

hvd.init()
assert hvd.size() >= 2
assert hvd_keras.PartialDistributedOptimizer is hvd.PartialDistributedOptimizer
tf.keras.utils.set_random_seed(100 + hvd.rank())  # each rank starts elsewhere

model = tf.keras.Sequential([tf.keras.Input((6,)), tf.keras.layers.Dense(8),
                             hvd_tf.SyncBatchNormalization(), tf.keras.layers.Activation("relu"),
                             tf.keras.layers.Dense(1)])
opt = hvd_keras.PartialDistributedOptimizer(tf.keras.optimizers.SGD(0.05 * hvd.size()),
                                            backward_passes_per_step=2,
                                            average_aggregated_gradients=True)
model.compile(optimizer=opt, loss="mse")
rng = np.random.RandomState(hvd.rank())
x, y = rng.randn(32, 6).astype(np.float32), rng.randn(32, 1).astype(np.float32)
checkpoint = hvd.callbacks.BestModelCheckpoint(monitor="loss")
checkpoint.filepath = os.path.join(tempfile.mkdtemp(), "best.keras")
history = model.fit(x, y, batch_size=8, epochs=3, verbose=0, callbacks=[
    hvd.callbacks.BroadcastGlobalVariablesCallback(0), hvd.callbacks.MetricAverageCallback(),
    checkpoint])

weights = hvd.allgather_object([w for w in model.get_weights()])
for other in weights:
    for a, b in zip(other, weights[0]):
        np.testing.assert_allclose(a, b, rtol=1e-5)
assert int(opt.iterations.numpy()) == 12 and int(opt._agg_helper.counter.numpy()) == 0
assert os.path.exists(checkpoint.filepath)
assert np.isfinite(history.history["loss"]).all()
print("rank %d: horovod-style Keras training OK" % hvd.rank())
