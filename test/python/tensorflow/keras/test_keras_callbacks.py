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
