"""Data-parallel training equals single-process training on the global batch (tape and
model.fit), and the Keras callbacks."""
import keras
import numpy as np
import pytest
import tensorflow as tf

import hvdsparse.tensorflow as hvd
import hvdsparse.tensorflow.keras as hvdk

GLOBAL = 12  # divisible by 2 and 3


def _data():
    rng = np.random.RandomState(7)
    return (rng.randn(GLOBAL * 2, 5).astype(np.float32),
            rng.randn(GLOBAL * 2, 1).astype(np.float32))


def _model(seed=3):
    keras.utils.set_random_seed(seed)
    m = keras.Sequential([keras.Input((5,)), keras.layers.Dense(8, activation="tanh"),
                          keras.layers.Dense(1)])
    return m


def _local(a, step):
    n, r = hvd.size(), hvd.rank()
    per = GLOBAL // n
    batch = a[step * GLOBAL:(step + 1) * GLOBAL]
    return batch[r * per:(r + 1) * per]


@pytest.mark.parametrize("compiled", [False, True])
def test_tape_equivalence(compiled):
    x, y = _data()
    dist, ref = _model(), _model()
    opt_d, opt_r = keras.optimizers.SGD(0.1), keras.optimizers.SGD(0.1)

    def step_dist(xb, yb):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(dist(xb) - yb))
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, dist.trainable_variables)
        opt_d.apply_gradients(zip(grads, dist.trainable_variables))

    def step_ref(xb, yb):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(ref(xb) - yb))
        grads = tape.gradient(loss, ref.trainable_variables)
        opt_r.apply_gradients(zip(grads, ref.trainable_variables))
    if compiled:
        step_dist, step_ref = tf.function(step_dist), tf.function(step_ref)
    for s in range(2):
        step_dist(_local(x, s), _local(y, s))
        step_ref(x[s * GLOBAL:(s + 1) * GLOBAL], y[s * GLOBAL:(s + 1) * GLOBAL])
    for a, b in zip(dist.trainable_variables, ref.trainable_variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5)


def test_tape_options_sparse_and_groups():
    emb = tf.Variable(tf.ones([6, 2]))
    w = tf.Variable(tf.ones([2]))
    r, n = hvd.rank(), hvd.size()
    for kwargs in ({}, {"sparse_as_dense": True}, {"num_groups": 1},
                   {"groups": [[emb, w]]}, {"compression": hvd.Compression.fp16},
                   {"op": hvd.Average, "gradient_predivide_factor": 2.0}):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.gather(emb, [r]) * w) * (r + 1)
        tape = hvd.DistributedGradientTape(tape, **kwargs)
        g_emb, g_w = tape.gradient(loss, [emb, w])
        dense = tf.convert_to_tensor(g_emb).numpy()
        expected = np.zeros([6, 2])
        for q in range(n):
            expected[q] = (q + 1) / n
        np.testing.assert_allclose(dense, expected, rtol=1e-3)
        np.testing.assert_allclose(g_w.numpy(), [sum(q + 1 for q in range(n)) / n] * 2,
                                   rtol=1e-3)


def test_partial_tape():
    model = _model()
    model(tf.zeros([1, 5]))
    local = model.layers[1]
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(tf.ones([2, 5]) * (hvd.rank() + 1)))
    local_grads = tape.gradient(loss, local.trainable_weights)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(tf.ones([2, 5]) * (hvd.rank() + 1)))
    tape = hvd.PartialDistributedGradientTape(tape, local_layers=[local])
    grads = tape.gradient(loss, model.trainable_weights)
    for g, lg in zip(grads[-2:], local_grads):
        np.testing.assert_allclose(g.numpy(), lg.numpy() / hvd.size(), rtol=1e-5)


def test_partial_tape_local_and_global_gradients():
    """Horovod's get_local_and_global_gradients: (source, gradient) pairs split by locality."""
    model = _model()
    model(tf.zeros([1, 5]))
    local = model.layers[1]
    with tf.GradientTape(persistent=True) as tape:
        loss = tf.reduce_sum(model(tf.ones([2, 5]) * (hvd.rank() + 1)))
    own = tape.gradient(loss, local.trainable_weights)
    tape = hvd.PartialDistributedGradientTape(tape, local_layers=[local])
    local_pairs, global_pairs = tape.get_local_and_global_gradients(loss,
                                                                    model.trainable_weights)
    assert [id(v) for v, _ in local_pairs] == [id(v) for v in local.trainable_weights]
    assert len(global_pairs) == len(model.trainable_weights) - len(local_pairs)
    for (_, g), lg in zip(local_pairs, own):
        np.testing.assert_allclose(g.numpy(), lg.numpy() / hvd.size(), rtol=1e-5)


def test_keras_fit_equivalence():
    x, y = _data()
    per = GLOBAL // hvd.size()
    idx = np.concatenate([np.arange(s * GLOBAL + hvd.rank() * per, s * GLOBAL + (hvd.rank() + 1)
                                    * per) for s in range(2)])
    dist, ref = _model(), _model()
    dist.compile(optimizer=hvdk.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss="mse")
    ref.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    dist.fit(x[idx], y[idx], batch_size=per, epochs=2, shuffle=False, verbose=0,
             callbacks=[hvdk.callbacks.BroadcastGlobalVariablesCallback(0)])
    ref.fit(x, y, batch_size=GLOBAL, epochs=2, shuffle=False, verbose=0)
    for a, b in zip(dist.trainable_variables, ref.trainable_variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5)
    assert type(dist.optimizer).__name__ == "SGD"


def test_keras_callbacks():
    x, y = _data()
    model = _model(seed=10 + hvd.rank())  # different initial weights on every rank
    model.compile(optimizer=hvdk.DistributedOptimizer(keras.optimizers.SGD(0.05)), loss="mse")
    seen = []

    class Record(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            seen.append((logs["loss"], logs["lr"]))
    cbs = [hvdk.callbacks.BroadcastGlobalVariablesCallback(0),
           hvdk.callbacks.MetricAverageCallback(),
           hvdk.callbacks.LearningRateWarmupCallback(0.05, warmup_epochs=2),
           Record()]
    model.fit(x[hvd.rank()::hvd.size()], y[hvd.rank()::hvd.size()], batch_size=4, epochs=3,
              verbose=0, callbacks=cbs)
    gathered = hvd.allgather_object([v.numpy() for v in model.trainable_variables])
    for other in gathered:
        for a, b in zip(other, gathered[0]):
            np.testing.assert_array_equal(a, b)
    everyone = hvd.allgather_object(seen)
    assert all(s == everyone[0] for s in everyone)  # averaged metrics agree
    assert abs(seen[-1][1] - 0.05) < 1e-7 and seen[0][1] < 0.05


@pytest.mark.parametrize("compiled", [False, True])
def test_tape_over_a_process_set_leaves_the_other_ranks_gradients_alone(compiled):
    """As Horovod: the set's members average over it, the others keep their own gradient."""
    evens = hvd.add_process_set([r for r in range(hvd.size()) if r % 2 == 0])
    try:
        x = tf.Variable(float(hvd.rank()))

        def grad():
            with tf.GradientTape() as tape:
                y = x * x
            return hvd.DistributedGradientTape(tape, process_set=evens).gradient(y, [x])[0]
        got = float((tf.function(grad) if compiled else grad)())
        want = 2.0 * (sum(evens.ranks) / len(evens.ranks) if evens.included() else hvd.rank())
        assert got == pytest.approx(want)
    finally:
        hvd.remove_process_set(evens)
