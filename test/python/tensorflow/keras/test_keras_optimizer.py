"""DistributedOptimizer over whichever Keras tf.keras is. This directory runs under Keras 3
and, with TF_USE_LEGACY_KERAS=1, under tf_keras (test/python/CMakeLists.txt)."""
import numpy as np
import pytest
import tensorflow as tf

import hvdsparse.tensorflow as hvd
import hvdsparse.tensorflow.keras as hvdk


def _sum_of_ranks():
    return sum(r + 1 for r in range(hvd.size()))


def _run(mode, fn):
    return fn() if mode == "eager" else tf.function(fn)()


@pytest.mark.parametrize("path", ["apply_gradients", "compute_gradients"])
def test_gradients_are_reduced_once(mode, path):
    # op=Sum makes a second reduction visible: it would multiply the step by size().
    w = tf.Variable([0.0, 0.0])
    opt = hvdk.DistributedOptimizer(tf.keras.optimizers.SGD(learning_rate=1.0), op=hvd.Sum)

    def loss():
        return tf.reduce_sum(w) * float(hvd.rank() + 1)

    def step():
        if path == "apply_gradients":
            grads = [tf.ones([2]) * float(hvd.rank() + 1)]
            opt.apply_gradients(zip(grads, [w]))
        else:
            opt.apply_gradients(opt.compute_gradients(loss, [w]))
    _run(mode, step)
    np.testing.assert_allclose(w.numpy(), [-_sum_of_ranks()] * 2)


def test_legacy_optimizer():
    """A Keras 2 legacy optimizer (tf_keras's OptimizerV2) is wrapped whichever Keras tf.keras
    is: Keras 3 has no legacy optimizers of its own, so it comes from tf_keras directly."""
    import tf_keras
    base = tf_keras.optimizers.legacy.SGD(learning_rate=1.0)
    w = tf.Variable([0.0])
    opt = hvdk.DistributedOptimizer(base)
    opt.apply_gradients([(tf.constant([float(hvd.rank() + 1)]), w)])
    np.testing.assert_allclose(w.numpy(), [-_sum_of_ranks() / hvd.size()], rtol=1e-6)


def test_from_config_keeps_class_and_config():
    opt = hvdk.DistributedOptimizer(tf.keras.optimizers.Adam(0.01))
    cfg = opt.get_config()
    copy = opt.__class__.from_config(cfg)
    assert copy.get_config() == cfg
    assert type(copy).__name__ == "Adam" and isinstance(copy, tf.keras.optimizers.Adam)
