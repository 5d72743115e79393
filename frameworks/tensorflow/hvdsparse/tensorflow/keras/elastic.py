"""hvdsparse.tensorflow.keras.elastic (also horovod.keras.elastic under the alias): Horovod's
elastic API for model.fit, for whichever Keras tf.keras is.

    state = hvd.elastic.KerasState(model, batch=0, epoch=0)
    callbacks = [hvd.elastic.UpdateEpochStateCallback(state),
                 hvd.elastic.UpdateBatchStateCallback(state),
                 hvd.elastic.CommitStateCallback(state, batches_per_commit=10)]

    @hvd.elastic.run
    def train(state):
        state.model.fit(dataset, steps_per_epoch=..., epochs=epochs - state.epoch,
                        callbacks=callbacks)

    train(state)
"""
import tensorflow as tf

from hvdsparse.tensorflow.elastic import TensorFlowKerasState, run  # noqa: F401


class KerasState(TensorFlowKerasState):
    """Horovod's KerasState(model, optimizer=None, **kwargs): a TensorFlowKerasState for a
    tf.keras model; the optimizer defaults to the one the model was compiled with."""

    def __init__(self, model, optimizer=None, **kwargs):
        super().__init__(model, optimizer=optimizer, backend=tf.keras.backend, **kwargs)


class CommitStateCallback(tf.keras.callbacks.Callback):
    """Commits state every batches_per_commit batches and at the end of every epoch. The count
    starts again at every fit (so every rank counts alike after a reset)."""

    def __init__(self, state, batches_per_commit=1):
        super().__init__()
        self.state = state
        self.batches_per_commit = batches_per_commit
        self.batches_remaining = batches_per_commit

    def on_train_begin(self, logs=None):
        self.batches_remaining = self.batches_per_commit

    def on_batch_end(self, batch, logs=None):
        self.batches_remaining -= 1
        if self.batches_remaining == 0:
            self.commit()
            self.batches_remaining = self.batches_per_commit

    def on_epoch_end(self, epoch, logs=None):
        self.commit()

    def commit(self):
        self.state.commit()


class UpdateBatchStateCallback(tf.keras.callbacks.Callback):
    """Sets state.batch to the index of the batch just done at the end of every batch, and to 0
    at the end of every epoch. With steps_per_epoch, the first epoch of a fit gets
    params['steps'] = steps_per_epoch - state.batch, as Horovod's; Keras 3's and tf_keras's fit
    loops do not read it (only the progress bar does), so that epoch runs all its steps."""

    def __init__(self, state):
        super().__init__()
        self.state = state
        self.steps_per_epoch = None

    def on_train_begin(self, logs=None):
        self.steps_per_epoch = None

    def on_epoch_begin(self, epoch, logs=None):
        if self.params.get("steps"):
            if self.steps_per_epoch is None:
                self.steps_per_epoch = self.params.get("steps")
            self.params["steps"] = self.steps_per_epoch - self.state.batch

    def on_batch_end(self, batch, logs=None):
        self.state.batch = batch

    def on_epoch_end(self, epoch, logs=None):
        self.state.batch = 0


class UpdateEpochStateCallback(tf.keras.callbacks.Callback):
    """Sets state.epoch at the end of every epoch to the epochs done across resets: state.epoch
    when the fit began, plus Keras' epoch index, plus one (the epoch just done is not repeated
    after a reset)."""

    def __init__(self, state):
        super().__init__()
        self.state = state
        self.initial_epoch = state.epoch

    def on_train_begin(self, logs=None):
        self.initial_epoch = self.state.epoch

    def on_epoch_end(self, epoch, logs=None):
        self.state.epoch = self.initial_epoch + epoch + 1
