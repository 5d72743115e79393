"""PartialDistributedOptimizer and register_local_var: local variables keep their own
gradient (divided by size() with scale_local_gradients), the others are averaged."""
import numpy as np
import pytest
import tensorflow as tf

import hvdsparse.tensorflow as hvd
import hvdsparse.tensorflow.keras as hvdk


def _model():
    init = tf.keras.initializers.Constant(float(hvd.rank() + 1))  # a different model per rank
    model = tf.keras.Sequential([
        tf.keras.Input((3,)),
        tf.keras.layers.Dense(2, kernel_initializer=init, bias_initializer=init),
        tf.keras.layers.Dense(1, kernel_initializer=init, bias_initializer=init)])
    return model


@pytest.mark.parametrize("num_local", [0, 1, 2])
def test_local_layers_keep_their_gradients(num_local):
    model = _model()
    x = np.ones((2, 3), np.float32)
    with tf.GradientTape(persistent=True) as tape:
        loss = tf.reduce_sum(model(x))
    plain = tape.gradient(loss, model.trainable_weights)
    local_layers = model.layers[:num_local]
    opt = hvdk.PartialDistributedOptimizer(tf.keras.optimizers.Adam(), local_layers=local_layers)
    reduced = [g for g, _ in opt.compute_gradients(loss, model.trainable_weights, tape=tape)]
    local = {id(v) for layer in local_layers for v in layer.trainable_weights}
    for v, p, r in zip(model.trainable_weights, plain, reduced):
        if id(v) in local:
            np.testing.assert_allclose(r.numpy(), p.numpy() / hvd.size(), rtol=1e-6)
        else:
            averaged = hvd.allreduce(p, op=hvd.Average)
            np.testing.assert_allclose(r.numpy(), averaged.numpy(), rtol=1e-6)


def test_local_var_with_aggregation():
    shared, local = tf.Variable([0.0]), tf.Variable([0.0])
    opt = hvdk.DistributedOptimizer(tf.keras.optimizers.SGD(learning_rate=1.0),
                                    backward_passes_per_step=2, scale_local_gradients=False)
    opt.register_local_var(local)
    g = tf.constant([float(hvd.rank() + 1)])
    for _ in range(2):
        opt.apply_gradients([(g, shared), (g, local)])
    mean = sum(r + 1 for r in range(hvd.size())) / hvd.size()
    np.testing.assert_allclose(shared.numpy(), [-2 * mean], rtol=1e-6)
    np.testing.assert_allclose(local.numpy(), [-2.0 * (hvd.rank() + 1)], rtol=1e-6)
