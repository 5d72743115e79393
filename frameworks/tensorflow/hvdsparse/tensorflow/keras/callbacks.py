"""Keras callbacks: BroadcastGlobalVariablesCallback, MetricAverageCallback,
LearningRateScheduleCallback, LearningRateWarmupCallback, BestModelCheckpoint.

They derive from tf.keras's classes, so they follow whichever Keras tf.keras is: Keras 3, or
tf_keras under TF_USE_LEGACY_KERAS=1 (whose fit needs its own Callback's hooks; a tf_keras
callback also runs in a Keras 3 fit)."""
import numpy as np
import tensorflow as tf

from hvdsparse.tensorflow import mpi_ops
from hvdsparse.tensorflow.functions import broadcast_variables, optimizer_variables
from hvdsparse.tensorflow.mpi_ops import Average, global_process_set


class BroadcastGlobalVariablesCallback(tf.keras.callbacks.Callback):
    """Broadcasts the model's variables from root_rank when training starts, and the model's and
    the optimizer's after the first batch (the optimizer creates its slots on its first step),
    so every rank starts from root_rank's state."""

    def __init__(self, root_rank, device='', local_variables=None,
                 process_set=global_process_set):
        super().__init__()
        self.root_rank = root_rank
        self.process_set = process_set
        self.local_variables = local_variables or []
        self.broadcast_done = False

    def _shared(self, variables):
        local = {id(v) for v in self.local_variables}
        return [v for v in variables if id(v) not in local]

    def on_train_begin(self, logs=None):
        if self.model.built and self.model.variables:
            broadcast_variables(self._shared(self.model.variables), self.root_rank,
                                self.process_set)

    def on_batch_end(self, batch, logs=None):
        if self.broadcast_done:
            return
        broadcast_variables(self._shared(self.model.variables), self.root_rank, self.process_set)
        opt_vars = optimizer_variables(getattr(self.model, "optimizer", None))
        if opt_vars:
            broadcast_variables(opt_vars, self.root_rank, self.process_set)
        self.broadcast_done = True


class MetricAverageCallback(tf.keras.callbacks.Callback):
    """Averages the epoch's metrics over the ranks at the end of every epoch (put it before
    callbacks that read the metrics, such as ReduceLROnPlateau or checkpointing)."""

    def __init__(self, device='', process_set=global_process_set):
        super().__init__()
        self.process_set = process_set

    def on_epoch_end(self, epoch, logs=None):
        if not logs:
            return
        keys = sorted(k for k, v in logs.items() if np.ndim(v) == 0 and
                      np.issubdtype(np.asarray(v).dtype, np.number))
        if not keys:
            return
        values = np.array([float(logs[k]) for k in keys], dtype=np.float64)
        avg = mpi_ops.allreduce(values, op=Average, name="MetricAverageCallback.%d" % epoch,
                                process_set=self.process_set).numpy()
        for k, v in zip(keys, avg):
            logs[k] = float(v)


def _get_lr(optimizer):
    lr = optimizer.learning_rate
    return float(lr.numpy() if hasattr(lr, "numpy") else lr)


def _change_lr(optimizer, value, momentum_correction):
    """Sets the rate; with momentum_correction, scales the momentum buffers by new/old rate."""
    old = _get_lr(optimizer)
    optimizer.learning_rate = value
    if momentum_correction and old > 0 and value != old:
        for buffer in _momentum_buffers(optimizer):
            buffer.assign(buffer * (value / old))


def _momentum_buffers(optimizer):
    """The velocity buffers of an optimizer with a nonzero `momentum` (SGD, RMSprop), each
    holding past rates times gradients: empty before its first step. Scaling them by new/old
    rate when the rate changes is Horovod's momentum correction (Goyal et al.), which
    multiplies the momentum by new/old for the one step that follows: the same update."""
    momentum = getattr(optimizer, "momentum", 0.0)
    if not float(momentum.numpy() if hasattr(momentum, "numpy") else momentum):
        return []
    for name in ("momentums", "_momentums"):  # Keras 3 and tf_keras: SGD, RMSprop
        buffers = getattr(optimizer, name, None)
        if buffers:
            return list(buffers)
    slots = getattr(optimizer, "_slots", None)  # tf_keras' legacy OptimizerV2
    if isinstance(slots, dict):
        return [s["momentum"] for s in slots.values() if "momentum" in s]
    return []


class LearningRateScheduleCallback(tf.keras.callbacks.Callback):
    """Sets the learning rate to initial_lr * multiplier (a number, or a function of the epoch,
    fractional when staircase=False) between start_epoch and end_epoch.

    momentum_correction (as Horovod's): when the rate changes, the momentum buffers are scaled
    by new/old rate, so the step after a change does not carry the old rate's velocity."""

    def __init__(self, initial_lr, multiplier, start_epoch=0, end_epoch=None, staircase=True,
                 momentum_correction=True, steps_per_epoch=None):
        super().__init__()
        self.initial_lr = initial_lr
        self.start_epoch = start_epoch
        self.end_epoch = end_epoch
        self.staircase = staircase
        self.momentum_correction = momentum_correction
        self.steps_per_epoch = steps_per_epoch
        self.current_epoch = None
        self.multiplier = multiplier if callable(multiplier) else (lambda epoch: multiplier)

    def _in_range(self, epoch):
        return epoch >= self.start_epoch and (self.end_epoch is None or epoch < self.end_epoch)

    def _adjust(self, epoch):
        _change_lr(self.model.optimizer, self.initial_lr * self.multiplier(epoch),
                   self.momentum_correction)

    def on_train_begin(self, logs=None):
        if self.steps_per_epoch is None:
            self.steps_per_epoch = (self.params or {}).get("steps")

    def on_epoch_begin(self, epoch, logs=None):
        self.current_epoch = epoch
        if self.staircase and self._in_range(epoch):
            self._adjust(epoch)

    def on_batch_begin(self, batch, logs=None):
        if self.staircase or not self._in_range(self.current_epoch):
            return
        if not self.steps_per_epoch:
            raise ValueError("steps_per_epoch is needed when staircase=False and Keras does "
                             "not know the number of steps")
        self._adjust(self.current_epoch + float(batch) / self.steps_per_epoch)

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["lr"] = _get_lr(self.model.optimizer)


class LearningRateWarmupCallback(LearningRateScheduleCallback):
    """Ramps the learning rate from initial_lr / size() to initial_lr over warmup_epochs
    (Goyal et al.), batch by batch."""

    def __init__(self, initial_lr, warmup_epochs=5, momentum_correction=True,
                 steps_per_epoch=None, verbose=0):
        def multiplier(epoch):
            n = mpi_ops.size()
            return 1.0 / n * (epoch * (n - 1) / warmup_epochs + 1)
        super().__init__(initial_lr, multiplier, start_epoch=0, end_epoch=warmup_epochs,
                         staircase=False, momentum_correction=momentum_correction,
                         steps_per_epoch=steps_per_epoch)
        self.verbose = verbose
        self.warmup_epochs = warmup_epochs

    def on_epoch_end(self, epoch, logs=None):
        if epoch == self.warmup_epochs - 1:
            # the ramp ends exactly at initial_lr
            _change_lr(self.model.optimizer, self.initial_lr, self.momentum_correction)
        super().on_epoch_end(epoch, logs)
        if epoch == self.warmup_epochs - 1 and self.verbose > 0 and mpi_ops.rank() == 0:
            print("\nEpoch %d: finished gradual learning rate warmup to %g."
                  % (epoch + 1, _get_lr(self.model.optimizer)))


class BestModelCheckpoint(tf.keras.callbacks.ModelCheckpoint):
    """ModelCheckpoint that saves only the best model so far (save_best_only) by monitor.
    filepath may be left out and set later (callback.filepath = ...) before training starts,
    as Horovod's elastic state does."""

    def __init__(self, monitor='val_loss', verbose=0, save_weights_only=False, mode='auto',
                 save_freq='epoch', filepath=None):
        # Keras 3 checks the path's extension when constructed, so it gets a well-formed one.
        placeholder = "best.weights.h5" if save_weights_only else "best.keras"
        super().__init__(filepath=filepath or placeholder, monitor=monitor, verbose=verbose,
                         save_best_only=True, save_weights_only=save_weights_only, mode=mode,
                         save_freq=save_freq)
        self.filepath = filepath

    def on_train_begin(self, logs=None):
        if self.filepath is None:
            raise ValueError("BestModelCheckpoint: set filepath before training")
        parent = getattr(super(), "on_train_begin", None)
        if parent is not None:
            parent(logs)
