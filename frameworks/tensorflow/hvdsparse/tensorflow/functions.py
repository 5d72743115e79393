"""broadcast_variables, broadcast_object, broadcast_object_fn, allgather_object."""
import cloudpickle
import numpy as np
import tensorflow as tf

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
    mpi_ops._require_init()
    ps_id = mpi_ops._set_id(process_set)
    root = mpi_ops._root_index(root_rank, process_set)
    names = [mpi_ops._name("broadcast", None, ps_id) for _ in tensors]
    tensors = [mpi_ops._prepare(t) for t in tensors]

    def body(arrays):
        return mpi_ops._complete([mpi_ops._start_broadcast(a, n, ps_id, root)
                                  for a, n in zip(arrays, names)])
    outs = mpi_ops._run(body, tensors, [t.dtype for t in tensors])
    for o, t in zip(outs, tensors):
        o.set_shape(t.shape)
    return outs


def _bytes_tensor(obj):
    return tf.constant(np.frombuffer(cloudpickle.dumps(obj), dtype=np.uint8))


def broadcast_object(obj, root_rank=0, session=None, name=None,
                     process_set=global_process_set):
    """Sends a picklable object (cloudpickle) from root_rank to every rank of the set.
    Eager only (as Horovod's TF2 path)."""
    if not mpi_ops._executing_eagerly():
        raise RuntimeError("broadcast_object runs eagerly; call it outside tf.function")
    name = name or type(obj).__name__
    if mpi_ops.rank() == root_rank:
        data = _bytes_tensor(obj)
        sz = tf.constant([int(data.shape[0])], dtype=tf.int64)
        mpi_ops.broadcast(sz, root_rank, name + ".sz", process_set=process_set)
        mpi_ops.broadcast(data, root_rank, name + ".t", process_set=process_set)
        return obj
    sz = mpi_ops.broadcast(tf.constant([0], dtype=tf.int64), root_rank, name + ".sz",
                           process_set=process_set)
    data = mpi_ops.broadcast(tf.zeros([int(sz.numpy()[0])], dtype=tf.uint8), root_rank,
                             name + ".t", process_set=process_set)
    return cloudpickle.loads(data.numpy().tobytes())


def broadcast_object_fn(root_rank=0, session=None, name=None, process_set=global_process_set):
    """A function obj -> broadcast_object(obj, ...), as Horovod's."""
    return lambda obj: broadcast_object(obj, root_rank, session, name, process_set)


def allgather_object(obj, session=None, name=None, process_set=global_process_set):
    """Gathers a picklable object from every rank of the set; a list in rank order."""
    if not mpi_ops._executing_eagerly():
        raise RuntimeError("allgather_object runs eagerly; call it outside tf.function")
    name = name or type(obj).__name__
    data = _bytes_tensor(obj)
    sizes = mpi_ops.allgather(tf.constant([int(data.shape[0])], dtype=tf.int64),
                              name=name + ".sz", process_set=process_set).numpy().tolist()
    gathered = mpi_ops.allgather(data, name=name + ".t", process_set=process_set).numpy()
    out, offset = [], 0
    for n in sizes:
        out.append(cloudpickle.loads(gathered[offset:offset + n].tobytes()))
        offset += n
    return out
