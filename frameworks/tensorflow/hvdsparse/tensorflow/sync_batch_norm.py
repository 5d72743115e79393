"""SyncBatchNormalization: Keras batch normalization whose training-time batch statistics are
those of the ranks' batches together.

Every rank's mean and mean of squares are averaged over the ranks (the variance is then
E[x^2] - E[x]^2), as Horovod does, so ranks are weighted equally: equal per-rank batches give
the statistics of the global batch. The allreduce is differentiable, so the gradients are those
of the global batch too. Derives from whichever BatchNormalization tf.keras is (Keras 3 or
tf_keras)."""
import inspect

import tensorflow as tf

from hvdsparse.tensorflow import mpi_ops
from hvdsparse.tensorflow.mpi_ops import Average


class SyncBatchNormalization(tf.keras.layers.BatchNormalization):

    def __init__(self, fused=False, **kwargs):
        if fused in (True, None):
            raise ValueError("SyncBatchNormalization does not support fused=True")
        # tf_keras's fused kernel would bypass _moments; Keras 3 has no fused argument.
        if "fused" in inspect.signature(tf.keras.layers.BatchNormalization.__init__).parameters:
            kwargs["fused"] = False
        super().__init__(**kwargs)

    def _moments(self, *args, **kwargs):
        mean, variance = super()._moments(*args, **kwargs)
        if mpi_ops.size() == 1:
            return mean, variance
        stats = tf.stack([mean, variance + tf.square(mean)])
        stats = mpi_ops.allreduce(stats, op=Average)
        group_mean, group_mean_of_square = tf.unstack(stats)
        return group_mean, group_mean_of_square - tf.square(group_mean)
