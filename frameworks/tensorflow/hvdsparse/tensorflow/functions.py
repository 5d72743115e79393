"""broadcast_variables, broadcast_global_variables, broadcast_object, broadcast_object_fn,
allgather_object; and optimizer_variables, what a Keras optimizer of either Keras holds."""
import tensorflow as tf

from hvdsparse.common import objects, util
from hvdsparse.common.basics import require_init
from hvdsparse.common.process_sets import root_index, set_id
from hvdsparse.tensorflow import mpi_ops
from hvdsparse.tensorflow.mpi_ops import global_process_set


def broadcast_variables(variables, root_rank, process_set=global_process_set, inplace=False):
    """Assigns root_rank's values to the variables on every rank of the set. All broadcasts are
    enqueued before any is waited for (one negotiation round for the lot). Eagerly it assigns;
    in a graph (tf.function or TF1) it returns the op that assigns (one py_function)."""
    variables = list(variables)
    if not variables:
        return None
    values = mpi_ops._broadcast_group(variables, root_rank, [None] * len(variables),
                                      process_set)
    assigns = [v.assign(val) for v, val in zip(variables, values)]
    return None if mpi_ops._executing_eagerly() else tf.group(*assigns)


def broadcast_global_variables(root_rank):
    """TF1 graphs: the op that broadcasts every global variable from root_rank (a no-op when the
    graph has none). Eagerly it raises RuntimeError, as Horovod's."""
    if mpi_ops._executing_eagerly():
        raise RuntimeError("hvd.broadcast_global_variables() does not support eager execution; "
                           "use hvd.broadcast_variables(<model/optimizer variables>)")
    return broadcast_variables(tf.compat.v1.global_variables(), root_rank) or tf.no_op()


def broadcast_object(obj, root_rank=0, session=None, name=None,
                     process_set=global_process_set):
    """Sends a picklable object (cloudpickle) from root_rank to every rank of the set. Runs at
    once, eagerly or while a TF1 graph is built (Horovod runs it in the default session there);
    not inside tf.function. session is accepted and not needed."""
    _refuse_in_function("broadcast_object")
    return objects.broadcast_object(obj, root_rank, name, process_set, _broadcast_array)


def broadcast_object_fn(root_rank=0, session=None, name=None, process_set=global_process_set):
    """A function obj -> broadcast_object(obj, ...), as Horovod's."""
    return lambda obj: broadcast_object(obj, root_rank, session, name, process_set)


def allgather_object(obj, session=None, name=None, process_set=global_process_set):
    """Gathers a picklable object from every rank of the set; a list in rank order. Runs at
    once, as broadcast_object."""
    _refuse_in_function("allgather_object")
    return objects.allgather_object(obj, name, process_set, _allgather_array)


def _refuse_in_function(what):
    if tf.inside_function():
        raise RuntimeError("%s runs eagerly; call it outside tf.function" % what)


def _broadcast_array(array, root_rank, name, process_set):
    require_init()
    ps_id = set_id(process_set)
    full = util.op_name("broadcast", name, ps_id)
    root = root_index(root_rank, process_set)
    return mpi_ops._complete([mpi_ops._start_broadcast(array, full, ps_id, root)])[0]


def _allgather_array(array, name, process_set):
    require_init()
    ps_id = set_id(process_set)
    full = util.op_name("allgather", name, ps_id)
    return mpi_ops._complete([mpi_ops._start_allgather(array, full, ps_id)])[0]


def optimizer_variables(optimizer):
    """The variables of a Keras optimizer (Keras 3, tf_keras, or tf_keras's legacy OptimizerV2,
    whose `variables` is a method), as a list; [] for None."""
    if optimizer is None:
        return []
    v = optimizer.variables
    return list(v() if callable(v) else v)
