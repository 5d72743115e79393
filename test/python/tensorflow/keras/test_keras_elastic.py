"""hvd.elastic for Keras, in whichever Keras tf.keras is: KerasState's save/restore/sync/commit
of the model's and the optimizer's variables, the elastic callbacks in model.fit, and
elastic.run rolling back a fit that failed."""
import numpy as np
import pytest
import tensorflow as tf

import hvdsparse.tensorflow.keras as hvd
from hvdsparse.common.exceptions import HorovodInternalError
from hvdsparse.tensorflow.elastic import ObjectState
from hvdsparse.tensorflow.functions import optimizer_variables

EPOCHS, STEPS = 3, 4


def dense(seed):
    tf.keras.utils.set_random_seed(seed)
    model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(2)])
    return model


def weights_equal_everywhere(model):
    every = hvd.allgather_object([w for w in model.get_weights()])
    return all(np.array_equal(a, b) for other in every for a, b in zip(other, every[0]))


def test_state_syncs_from_rank_0_restores_and_commits():
    # Horovod's test_elastic_state, with the optimizer's slots as well.
    v = 1.0 if hvd.rank() == 0 else 2.0
    model = dense(0)
    model.set_weights([np.full((2, 2), v, np.float32), np.full((2,), v, np.float32)])
    other = [np.array([[1.0, 2.0], [3.0, 4.0]], np.float32), np.zeros(2, np.float32)]
    optimizer = tf.keras.optimizers.Adam(0.001 * hvd.size())
    state = hvd.elastic.KerasState(model, optimizer, batch=20 + hvd.rank(), epoch=10 + hvd.rank())
    assert state.model is model and state.optimizer is optimizer
    state.sync()
    for w in model.get_weights():
        np.testing.assert_array_equal(w, np.ones_like(w))
    assert (state.batch, state.epoch) == (20, 10)
    synced = model.get_weights()
    model.set_weights(other)
    state.batch, state.epoch = 21, 11
    state.restore()
    for w, expected in zip(model.get_weights(), synced):
        np.testing.assert_array_equal(w, expected)
    assert (state.batch, state.epoch) == (20, 10)
    model.set_weights(other)
    state.batch, state.epoch = 21, 11
    state.commit()
    state.restore()
    for w, expected in zip(model.get_weights(), other):
        np.testing.assert_array_equal(w, expected)
    assert (state.batch, state.epoch) == (21, 11)


def test_optimizer_slots_are_committed_and_restored():
    model = dense(1)
    optimizer = hvd.DistributedOptimizer(tf.keras.optimizers.Adam(0.1))
    state = hvd.elastic.KerasState(model, optimizer)
    state.sync()  # builds the optimizer: every rank broadcasts the same variables

    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(tf.ones((4, 2))) ** 2)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))

    step()
    state.commit()
    slots = [v.numpy() for v in optimizer_variables(optimizer)]
    weights = model.get_weights()
    step()
    state.restore()
    for v, saved in zip(optimizer_variables(optimizer), slots):
        np.testing.assert_array_equal(v.numpy(), saved)
    for w, saved in zip(model.get_weights(), weights):
        np.testing.assert_array_equal(w, saved)
    step()  # the optimizer still works after a restore


def test_state_needs_a_built_model():
    with pytest.raises(ValueError, match="built"):
        hvd.elastic.KerasState(tf.keras.Sequential([tf.keras.layers.Dense(1)]))


class RecordingState(hvd.elastic.KerasState):
    """A KerasState that records (batch, epoch) at every commit."""

    def __init__(self, *args, **kwargs):
        self.commits = []
        super().__init__(*args, **kwargs)

    def commit(self):
        self.commits.append((self.batch, self.epoch))
        super().commit()


def compiled(seed):
    model = dense(seed)
    model.compile(optimizer=hvd.DistributedOptimizer(tf.keras.optimizers.SGD(0.01)), loss="mse")
    return model


def data():
    rng = np.random.RandomState(3 + hvd.rank())
    return rng.randn(2 * STEPS, 2).astype(np.float32), rng.randn(2 * STEPS, 2).astype(np.float32)


def test_callbacks_update_batch_and_epoch_and_commit_every_n_batches():
    model = compiled(2)
    state = RecordingState(model, batch=0, epoch=0)
    x, y = data()
    model.fit(x, y, batch_size=2, epochs=EPOCHS, verbose=0,
              callbacks=[hvd.elastic.UpdateEpochStateCallback(state),
                         hvd.elastic.UpdateBatchStateCallback(state),
                         hvd.elastic.CommitStateCallback(state, batches_per_commit=3)])
    # 12 batches: commits after batches 3, 6, 9 and 12 of the fit (the count runs on across
    # epochs) and at the end of every epoch; state.batch is the index of the last batch done.
    assert state.commits == [(2, 0), (0, 1), (1, 1), (0, 2), (0, 2), (3, 2), (0, 3)]
    assert (state.batch, state.epoch) == (0, EPOCHS)


def test_epoch_callback_counts_from_the_state_and_batch_callback_shortens_steps():
    state = ObjectState(hvd.broadcast_object, hvd.rank, batch=1, epoch=2)
    epochs = hvd.elastic.UpdateEpochStateCallback(state)
    batches = hvd.elastic.UpdateBatchStateCallback(state)
    batches.set_params({"steps": STEPS, "epochs": 1})
    for callback in (epochs, batches):
        callback.on_train_begin()
    batches.on_epoch_begin(0)
    assert batches.params["steps"] == STEPS - 1
    batches.on_batch_end(2)
    assert state.batch == 2
    batches.on_epoch_end(0)
    epochs.on_epoch_end(0)
    assert (state.batch, state.epoch) == (0, 3)


def test_run_rolls_back_a_failed_fit_and_finishes():
    model = compiled(10 + hvd.rank())  # different weights on every rank: the sync unites them
    state = hvd.elastic.KerasState(model, batch=0, epoch=0)
    resets, fits, committed = [], [], []
    state.register_reset_callbacks([lambda: resets.append(hvd.size())])

    class FailOnce(tf.keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            # Every rank fails in the same batch, as they do when a peer dies; the batch has
            # changed the weights, and is not committed.
            if not resets and state.epoch == 1 and batch == 2:
                committed.append(model.get_weights())
                model.set_weights([w + 1 for w in committed[0]])
                raise HorovodInternalError("a peer failed")

    callbacks = [hvd.elastic.UpdateEpochStateCallback(state),
                 hvd.elastic.UpdateBatchStateCallback(state),
                 hvd.elastic.CommitStateCallback(state), FailOnce()]
    x, y = data()

    @hvd.elastic.run
    def train(state):
        fits.append((state.epoch, state.batch, model.get_weights()))
        model.fit(x, y, batch_size=2, epochs=EPOCHS - state.epoch, callbacks=callbacks,
                  verbose=0)

    train(state)
    # The second fit starts from the last commit: the end of batch index 1 of epoch 1.
    assert [f[:2] for f in fits] == [(0, 0), (1, 1)] and resets == [hvd.size()]
    for w, expected in zip(fits[1][2], committed[0]):
        np.testing.assert_array_equal(w, expected)
    assert state.epoch == EPOCHS and weights_equal_everywhere(model)
