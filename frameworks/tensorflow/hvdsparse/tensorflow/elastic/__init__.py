"""hvdsparse.tensorflow.elastic: Horovod's elastic training API for TensorFlow 2.

    @hvd.elastic.run
    def train(state):
        for state.batch in range(state.batch, batches):
            ...
            state.commit()

    state = hvd.elastic.TensorFlowKerasState(model, optimizer, batch=0)
    train(state)

Launch with `hvdsparse run --min-np 2 --max-np 4 --host-discovery-script ./hosts.sh python ...`.
For model.fit, see hvdsparse.tensorflow.keras.elastic (KerasState and the callbacks).
"""
import functools
import re

import tensorflow as tf

from hvdsparse.common.elastic import ObjectState, State, reset_runtime, run_fn  # noqa: F401
from hvdsparse.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt  # noqa: F401
from hvdsparse.tensorflow.elastic.state import (TensorFlowKerasState,  # noqa: F401
                                                TensorFlowState)

# A collective that failed inside tf.function (model.fit's train step) crosses tf.py_function,
# which keeps only its text: "HorovodAbortedError: ..." in a tf.errors.UnknownError.
_INTERNAL_ERROR = re.compile(r"\bHorovod(Aborted|Unknown|Precondition|Internal)Error: ")


def _internal_errors_raised(func):
    """func, with a collective's failure inside a traced function raised as
    HorovodInternalError (eager collectives raise it already)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except tf.errors.OpError as e:
            if isinstance(e, HorovodInternalError) or not _INTERNAL_ERROR.search(e.message):
                raise
            raise HorovodInternalError(e.message) from e

    return wrapper


def run(func):
    """Decorator: runs func(state, ...) and, when workers fail or join, rolls back (failure) or
    keeps (new hosts) the state, re-initialises with the launcher's new membership, syncs the state
    from rank 0 and calls func again. A failed collective in a tf.function (tf.errors.UnknownError
    naming a Horovod error) counts as a failure."""
    return run_fn(_internal_errors_raised(func), reset_runtime)
