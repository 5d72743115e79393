"""broadcast_variables, broadcast_object, broadcast_object_fn, allgather_object; and
optimizer_variables, what a Keras optimizer of either Keras holds."""
import tensorflow as tf

from hvdsparse.common import objects
from hvdsparse.common.basics import require_init
from hvdsparse.common.process_sets import root_index, set_id
from hvdsparse.tensorflow import mpi_ops
from hvdsparse.tensorflow.mpi_ops import global_process_set


def broadcast_variables(variables, root_rank, process_set=global_process_set, inplace=False):
    """Assigns root_rank's values to the variables on every rank of the set. All broadcasts are
    enqueued before any is waited for (one negotiation round for the lot). Works eagerly and in
    tf.function (one py_function)."""
    variables = list(variables)
    if not variables:
        return None
    if mpi_ops._executing_eagerly():
        values = _broadcast_values([v for v in variables], root_rank, process_set)
        for v, val in zip(variables, values):
            v.assign(val)
        return None
    values = _broadcast_values([tf.convert_to_tensor(v) for v in variables], root_rank,
                               process_set)
    return tf.group(*[v.assign(val) for v, val in zip(variables, values)])


def _broadcast_values(tensors, root_rank, process_set):
    require_init()
    ps_id = set_id(process_set)
    root = root_index(root_rank, process_set)
    names = [mpi_ops._name("broadcast", None, ps_id) for _ in tensors]
    tensors = [mpi_ops._prepare(t) for t in tensors]

    def body(arrays):
        return mpi_ops._complete([mpi_ops._start_broadcast(a, n, ps_id, root)
                                  for a, n in zip(arrays, names)])
    outs = mpi_ops._run(body, tensors, [t.dtype for t in tensors])
    for o, t in zip(outs, tensors):
        o.set_shape(t.shape)
    return outs


def broadcast_object(obj, root_rank=0, session=None, name=None,
                     process_set=global_process_set):
    """Sends a picklable object (cloudpickle) from root_rank to every rank of the set.
    Eager only (as Horovod's TF2 path)."""
    _require_eager("broadcast_object")
    return objects.broadcast_object(obj, root_rank, name, process_set, _broadcast_array)


def broadcast_object_fn(root_rank=0, session=None, name=None, process_set=global_process_set):
    """A function obj -> broadcast_object(obj, ...), as Horovod's."""
    return lambda obj: broadcast_object(obj, root_rank, session, name, process_set)


def allgather_object(obj, session=None, name=None, process_set=global_process_set):
    """Gathers a picklable object from every rank of the set; a list in rank order."""
    _require_eager("allgather_object")
    return objects.allgather_object(obj, name, process_set, _allgather_array)


def _require_eager(what):
    if not mpi_ops._executing_eagerly():
        raise RuntimeError("%s runs eagerly; call it outside tf.function" % what)


def _broadcast_array(array, root_rank, name, process_set):
    return mpi_ops.broadcast(tf.constant(array), root_rank, name,
                             process_set=process_set).numpy()


def _allgather_array(array, name, process_set):
    return mpi_ops.allgather(tf.constant(array), name=name, process_set=process_set).numpy()


def optimizer_variables(optimizer):
    """The variables of a Keras optimizer (Keras 3, tf_keras, or tf_keras's legacy OptimizerV2,
    whose `variables` is a method), as a list; [] for None."""
    if optimizer is None:
        return []
    v = optimizer.variables
    return list(v() if callable(v) else v)
