"""DistributedOptimizer(backward_passes_per_step=N): gradients summed locally, allreduced and
applied every N steps; the steps between only advance iterations."""
import numpy as np
import pytest
import tensorflow as tf

import hvdsparse.tensorflow as hvd
import hvdsparse.tensorflow.keras as hvdk

PASSES = 3


def _optimizer(average, **kwargs):
    return hvdk.DistributedOptimizer(tf.keras.optimizers.SGD(learning_rate=1.0),
                                     backward_passes_per_step=PASSES,
                                     average_aggregated_gradients=average, **kwargs)


@pytest.mark.parametrize("average", [False, True])
@pytest.mark.parametrize("path", ["apply_gradients", "compute_gradients"])
def test_applies_every_nth_step(mode, average, path):
    x = tf.Variable([0.0])
    opt = _optimizer(average)

    def loss():
        return tf.reduce_sum(x) * float(hvd.rank() + 1)

    def step():
        if path == "apply_gradients":
            opt.apply_gradients([(tf.constant([float(hvd.rank() + 1)]), x)])
        else:
            opt.apply_gradients(opt.compute_gradients(loss, [x]))
    if mode == "graph":
        step = tf.function(step)
    mean_grad = sum(r + 1 for r in range(hvd.size())) / hvd.size()
    per_apply = mean_grad * (1 if average else PASSES)
    for i in range(7):
        step()
        np.testing.assert_allclose(x.numpy(), [-((i + 1) // PASSES) * per_apply], rtol=1e-6)
        assert int(opt.iterations.numpy()) == i + 1
        assert int(opt._agg_helper.counter.numpy()) == (i + 1) % PASSES


def test_infinite_gradient_stays_in_its_cycle():
    x = tf.Variable([0.0])
    opt = _optimizer(False)
    reduced = []
    for g in [np.inf] + [1.0] * (2 * PASSES - 1):
        grads_and_vars = opt.compute_gradients(lambda: tf.reduce_sum(x) * g, [x])
        reduced.append(grads_and_vars[0][0].numpy())
    assert np.isinf(reduced[PASSES - 1]).all()  # the first cycle's sum
    np.testing.assert_allclose(reduced[-1], [float(PASSES)])  # the next starts from zero


def test_indexed_slices_need_sparse_as_dense():
    emb = tf.Variable(tf.zeros([4, 2]))

    def grads():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.gather(emb, [hvd.rank() % 4]))
        return tape.gradient(loss, [emb])
    with pytest.raises(ValueError, match="sparse_as_dense"):
        _optimizer(False).apply_gradients(zip(grads(), [emb]))
    opt = _optimizer(False, sparse_as_dense=True)
    for _ in range(PASSES):
        opt.apply_gradients(zip(grads(), [emb]))
    expected = np.zeros([4, 2])
    for r in range(hvd.size()):
        expected[r % 4] -= PASSES / hvd.size()
    np.testing.assert_allclose(emb.numpy(), expected, rtol=1e-6)


def test_fit_applies_every_nth_batch():
    tf.keras.utils.set_random_seed(4)
    model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer=_optimizer(True), loss="mse")
    start = [v.numpy() for v in model.trainable_variables]
    x = np.random.RandomState(hvd.rank()).randn(8, 3).astype(np.float32)
    y = np.ones((8, 1), np.float32)
    model.fit(x[:4], y[:4], batch_size=2, epochs=1, shuffle=False, verbose=0)  # 2 of 3 passes
    for a, b in zip(model.trainable_variables, start):
        np.testing.assert_array_equal(a.numpy(), b)
    model.fit(x[4:6], y[4:6], batch_size=2, epochs=1, shuffle=False, verbose=0)  # the 3rd
    assert int(model.optimizer.iterations.numpy()) == PASSES
    everyone = hvd.allgather_object([v.numpy() for v in model.trainable_variables])
    for a, b in zip(everyone[-1], start):
        assert not np.allclose(a, b)
    for other in everyone:
        for a, b in zip(other, everyone[0]):
            np.testing.assert_allclose(a, b, rtol=1e-6)
