"""TensorFlowState and TensorFlowKerasState: tf.Variables, or a Keras model and its optimizer,
and plain values kept across resets (TensorFlow 2, eager)."""
import tensorflow as tf

from hvdsparse.common.elastic import HandlerState
from hvdsparse.tensorflow import mpi_ops
from hvdsparse.tensorflow.functions import (broadcast_object, broadcast_variables,
                                            optimizer_variables)


class _VariablesHandler:
    """Keeps copies of some variables' values: save() takes them, restore() assigns them back
    to the variables they came from, sync() broadcasts the variables from rank 0 (one round for
    all of them) and keeps what arrived. variables() gives the current list; before_sync(), if
    given, runs first (so that every rank has the same list)."""

    def __init__(self, variables, before_sync=None):
        self._variables = variables
        self._before_sync = before_sync
        self.save()

    def save(self):
        self._saved = [(v, tf.identity(v)) for v in self._variables()]

    def restore(self):
        for v, value in self._saved:
            v.assign(value)

    def sync(self):
        if self._before_sync is not None:
            self._before_sync()
        broadcast_variables(self._variables(), root_rank=0)
        self.save()

    def reset(self):
        pass


def _require_eager(what):
    if not mpi_ops._executing_eagerly():
        raise NotImplementedError("%s needs eager execution (TensorFlow 2); TF1 graphs and "
                                  "sessions are not supported" % what)


class TensorFlowState(HandlerState):
    """Horovod's hvd.elastic.TensorFlowState(variables=None, session=None, **kwargs): commit()
    saves copies of the variables' values (default: tf.compat.v1.global_variables()) and of the
    keywords, restore() assigns them back, sync() broadcasts them from rank 0 and keeps them as
    the saved copies. TensorFlow 2 eager only: a session is refused."""

    def __init__(self, variables=None, session=None, **kwargs):
        _require_eager("TensorFlowState")
        if session is not None:
            raise NotImplementedError("TensorFlowState: TF1 sessions are not supported")
        self.variables = list(variables or tf.compat.v1.global_variables())
        self.session = None
        handler = _VariablesHandler(lambda: self.variables)
        super().__init__([handler], bcast_object=broadcast_object, get_rank=mpi_ops.rank,
                         **kwargs)


def _build_optimizer(optimizer, model):
    """Creates the optimizer's slots for the model's trainable variables if its first step has
    not (a worker that just joined), so that every rank broadcasts the same variables. The
    legacy OptimizerV2, which has no build(), is left as it is."""
    if optimizer is None or not hasattr(optimizer, "build"):
        return
    if getattr(optimizer, "built", False) or getattr(optimizer, "_built", False):
        return
    optimizer.build(model.trainable_variables)


class TensorFlowKerasState(HandlerState):
    """Horovod's hvd.elastic.TensorFlowKerasState(model, optimizer=None, backend=None,
    **kwargs): the model's variables and the optimizer's (default: model.optimizer) and the
    keywords; commit() saves copies, restore() assigns them back, sync() broadcasts them from
    rank 0 (building the optimizer first if it has no slots yet) and keeps them as the saved
    copies. The model must be built. backend is kept for Horovod's signature (TF1 only)."""

    def __init__(self, model, optimizer=None, backend=None, **kwargs):
        _require_eager("TensorFlowKerasState")
        if hasattr(model, "build") and not model.built:
            raise ValueError("Model must be built first. Run `model.build(input_shape)`.")
        self.model = model
        self.optimizer = optimizer or getattr(model, "optimizer", None)
        self.backend = backend
        handler = _VariablesHandler(
            lambda: list(self.model.variables) + optimizer_variables(self.optimizer),
            before_sync=lambda: _build_optimizer(self.optimizer, self.model))
        super().__init__([handler], bcast_object=broadcast_object, get_rank=mpi_ops.rank,
                         **kwargs)
