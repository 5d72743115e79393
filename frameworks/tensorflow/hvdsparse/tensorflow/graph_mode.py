"""Collectives as graph operations (tf.function and TF1 graphs run by a tf.compat.v1.Session).

A collective in a graph is a tf.py_function that enqueues and then waits: it holds one of the
session's inter-op threads until every rank of the set has enqueued the same operation. Ranks
may run a graph's independent collectives in different orders, so a session needs at least as
many inter-op threads as collectives that can run at once, or every thread of one rank waits
for an operation its peers cannot start. Horovod's compiled ops are asynchronous and need no
thread; here the sessions' shared pool is sized at import (TF_NUM_INTEROP_THREADS, unless set).

tf.py_function turns any Python error that is not a ValueError into tf.errors.UnknownError.
Horovod's ops raise tf.errors.FailedPreconditionError when ranks disagree, so a precondition
error is carried out of the py_function as data and raised by a read of a variable that does not
exist, named after the error (that read fails with FailedPreconditionError and the name).
"""
import os

import numpy as np
import tensorflow as tf

INTER_OP_THREADS = 128


def reserve_inter_op_threads():
    """Sizes the thread pool every tf.compat.v1.Session shares, before the first one exists. A
    session whose ConfigProto sets inter_op_parallelism_threads (or a tf.config.threading value
    set before it) keeps that number."""
    os.environ.setdefault("TF_NUM_INTEROP_THREADS", str(max(INTER_OP_THREADS, os.cpu_count() or 1)))


def run(body, inputs, tout, precondition_error):
    """body(list of eager tensors) -> list of numpy arrays or tensors, as one tf.py_function
    whose precondition_error is raised as tf.errors.FailedPreconditionError."""

    @tf.autograph.experimental.do_not_convert
    def py(*xs):
        try:
            outs = body(list(xs))
        except precondition_error as e:
            dummies = [np.zeros([0], dtype=tf.as_dtype(t).as_numpy_dtype) for t in tout]
            return dummies + [str(e)]
        return [tf.convert_to_tensor(o) for o in outs] + [""]
    outs = tf.py_function(py, list(inputs), Tout=list(tout) + [tf.string])
    outs, error = list(outs[:-1]), outs[-1]
    check = tf.cond(tf.equal(error, ""), lambda: tf.constant(True), lambda: _raise(error))
    with tf.control_dependencies([check]):
        return [tf.identity(o) for o in outs]


def _raise(message):
    """Fails with tf.errors.FailedPreconditionError whose text holds message."""
    handle = tf.py_function(_missing_variable, [message], Tout=tf.resource)
    read = tf.raw_ops.ReadVariableOp(resource=handle, dtype=tf.int32)
    return tf.equal(read, 0)


@tf.autograph.experimental.do_not_convert
def _missing_variable(message):
    return tf.raw_ops.VarHandleOp(dtype=tf.int32, shape=[], container="horovod",
                                  shared_name=message.numpy().decode(errors="replace"))
