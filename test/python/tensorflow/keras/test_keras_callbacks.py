"""The callbacks in model.fit of whichever Keras tf.keras is."""
import os

import numpy as np
import pytest
import tensorflow as tf

import hvdsparse.tensorflow as hvd
import hvdsparse.tensorflow.keras as hvdk


def _model(seed):
    tf.keras.utils.set_random_seed(seed)
    return tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(3, activation="tanh"),
                                tf.keras.layers.Dense(1)])


def _data():
    rng = np.random.RandomState(5 + hvd.rank())
    return rng.randn(8, 4).astype(np.float32), rng.randn(8, 1).astype(np.float32)


def test_fit_with_broadcast_and_metric_average():
    model = _model(seed=10 + hvd.rank())  # different initial weights on every rank
    model.compile(optimizer=hvdk.DistributedOptimizer(tf.keras.optimizers.SGD(0.05)), loss="mse")
    x, y = _data()
    history = model.fit(x, y, batch_size=4, epochs=2, verbose=0,
                        callbacks=[hvdk.callbacks.BroadcastGlobalVariablesCallback(0),
                                   hvdk.callbacks.MetricAverageCallback()])
    everyone = hvd.allgather_object([v.numpy() for v in model.trainable_variables])
    for other in everyone:
        for a, b in zip(other, everyone[0]):
            np.testing.assert_allclose(a, b, rtol=1e-6)
    losses = hvd.allgather_object(history.history["loss"])
    assert all(np.allclose(lo, losses[0]) for lo in losses)


def test_broadcast_skips_local_variables():
    root = hvd.size() - 1
    init = tf.keras.initializers.Constant(float(hvd.rank()))
    model = tf.keras.Sequential([
        tf.keras.Input((4,)),
        tf.keras.layers.Dense(2, kernel_initializer=init, bias_initializer=init, trainable=False),
        tf.keras.layers.Dense(1, kernel_initializer=init, bias_initializer=init, trainable=False)])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss="mse")
    local = list(model.layers[0].variables)
    x, y = _data()
    model.fit(x, y, epochs=1, verbose=0, callbacks=[
        hvdk.callbacks.BroadcastGlobalVariablesCallback(root, local_variables=local)])
    local_ids = {id(v) for v in local}
    for v in model.variables:
        expected = hvd.rank() if id(v) in local_ids else root
        np.testing.assert_array_equal(v.numpy(), np.full(v.shape, float(expected)))


def test_best_model_checkpoint(tmp_path):
    model = _model(seed=1)
    model.compile(optimizer=tf.keras.optimizers.SGD(0.05), loss="mse")
    x, y = _data()
    with pytest.raises(ValueError, match="filepath"):
        model.fit(x, y, epochs=1, verbose=0,
                  callbacks=[hvdk.callbacks.BestModelCheckpoint(monitor="loss")])
    checkpoint = hvdk.callbacks.BestModelCheckpoint(monitor="loss")
    checkpoint.filepath = str(tmp_path / ("best%d.keras" % hvd.rank()))
    history = model.fit(x, y, epochs=3, verbose=0, callbacks=[checkpoint])
    assert checkpoint.save_best_only
    assert os.path.exists(checkpoint.filepath)
    np.testing.assert_allclose(checkpoint.best, min(history.history["loss"]), rtol=1e-6)


def _momentum_optimizers():
    """SGD with momentum of whichever Keras tf.keras is, and tf_keras' legacy SGD with it."""
    made = [("sgd", lambda: tf.keras.optimizers.SGD(0.1, momentum=0.9))]
    if tf.keras.optimizers.SGD.__module__.startswith("tf_keras"):
        made.append(("legacy_sgd", lambda: tf.keras.optimizers.legacy.SGD(0.1, momentum=0.9)))
    return made


@pytest.mark.parametrize("correct", [True, False])
@pytest.mark.parametrize("name,make", _momentum_optimizers())
def test_schedule_corrects_momentum(name, make, correct):
    """The rate halves at epoch 1: with momentum_correction the velocity is scaled by 0.5 before
    that epoch's step (Horovod's one-step momentum scaling); the weights match that update
    worked out here, and without the correction they match the plain update."""
    tf.keras.utils.set_random_seed(3)
    model = tf.keras.Sequential([tf.keras.Input((2,)),
                                 tf.keras.layers.Dense(1, use_bias=False,
                                                       kernel_initializer="ones")])
    model.compile(optimizer=hvdk.DistributedOptimizer(make()), loss="mse")
    x = np.array([[1.0, 2.0], [3.0, -1.0]], np.float32)  # the same data on every rank
    y = np.array([[0.5], [-2.0]], np.float32)
    schedule = hvdk.callbacks.LearningRateScheduleCallback(
        0.1, lambda epoch: 1.0 if epoch < 1 else 0.5, momentum_correction=correct)
    model.fit(x, y, batch_size=2, epochs=3, verbose=0, shuffle=False, callbacks=[schedule])
    w, velocity = np.ones([2, 1]), np.zeros([2, 1])
    for epoch, lr in enumerate([0.1, 0.05, 0.05]):
        if correct and epoch == 1:
            velocity *= 0.5
        grad = 2.0 / len(x) * x.T @ (x @ w - y)
        velocity = 0.9 * velocity - lr * grad
        w = w + velocity
    np.testing.assert_allclose(model.trainable_variables[0].numpy(), w, rtol=1e-5)


def test_schedule_leaves_adam_moments_alone():
    """Adam has no momentum to correct: the same weights with and without the correction."""
    got = []
    for correct in (True, False):
        model = _model(seed=4)
        model.compile(optimizer=hvdk.DistributedOptimizer(tf.keras.optimizers.Adam(0.01)),
                      loss="mse")
        x, y = _data()
        schedule = hvdk.callbacks.LearningRateScheduleCallback(
            0.01, lambda epoch: 1.0 / (epoch + 1), momentum_correction=correct)
        model.fit(x, y, batch_size=4, epochs=3, verbose=0, shuffle=False,
                  callbacks=[schedule])
        got.append([v.numpy() for v in model.trainable_variables])
    for a, b in zip(*got):
        np.testing.assert_array_equal(a, b)


def _sessions():
    made = ["default"]
    if hasattr(tf.compat.v1.keras.backend, "get_session"):  # tf_keras
        made.append("keras")
    return made


@pytest.mark.parametrize("which", _sessions())
def test_broadcast_global_variables_in_a_tf1_graph(which):
    """hvd.keras.broadcast_global_variables runs the broadcast in the default session, else in
    Keras' own; eagerly it refuses, as Horovod's."""
    root = hvd.size() - 1
    with pytest.raises(RuntimeError, match="eager"):
        hvdk.broadcast_global_variables(root)
    with tf.Graph().as_default() as g:
        w = tf.compat.v1.Variable(tf.fill([2], float(hvd.rank())))
        if which == "keras":
            sess = tf.compat.v1.keras.backend.get_session()
            sess.run(tf.compat.v1.global_variables_initializer())
            hvdk.broadcast_global_variables(root)
            got = sess.run(w)
        else:
            # ConfigProto(): the sessions' shared pool keeps the size the binding gave it
            # (conftest's two inter-op threads would be inherited; test_tf1_graph.py needs more)
            with tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto()) as sess, \
                    sess.as_default():
                sess.run(tf.compat.v1.global_variables_initializer())
                hvdk.broadcast_global_variables(root)
                got = sess.run(w)
    np.testing.assert_array_equal(got, [root] * 2)
