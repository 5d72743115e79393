"""Collectives on TensorFlow tensors over libhvdsparse (ctypes), with Horovod's TensorFlow API.

The binding is not compiled against TensorFlow. Eagerly, each collective copies the tensor to a
host numpy array, runs the runtime's C call on it and wraps the result with tf.convert_to_tensor
(one copy in, one copy out). Inside tf.function the same eager code runs in a tf.py_function, so
graphs and Keras' compiled train step work; py_function ops are stateful, so tf.function's
automatic control dependencies keep them in program order on every rank.

Names: eager operations are named "<kind>.<name>" or "<kind>.noname.<n>" (a per-run counter, as
the torch binding); inside a graph an unnamed operation gets a name that is unique within the
graph being traced ("<kind>.graph.HorovodAllreduce_<k>"), fixed at trace time, so every step of a
traced function reuses the same names (the runtime's response cache then hits).

Errors: a failed collective raises a tf.errors.OpError subclass that is also a Horovod error:
mismatches across ranks (HVDS_PRECONDITION_ERROR) raise HorovodPreconditionError, a subclass of
both tf.errors.FailedPreconditionError (what Horovod's TF ops raise) and HorovodInternalError (a
RuntimeError); a dead peer or a shut-down runtime raises HorovodAbortedError
(tf.errors.AbortedError + HorovodInternalError). Inside tf.function the error crosses
tf.py_function, which keeps only the text: TensorFlow raises tf.errors.UnknownError whose message
holds the class name and Horovod's text ("HorovodPreconditionError: Mismatched ALLREDUCE tensor
shapes: ..."); ValueError-derived errors arrive as tf.errors.InvalidArgumentError. Horovod's own
compiled ops raise FailedPreconditionError there; that needs a compiled op library.
"""
import numpy as np
import tensorflow as tf

from hvdsparse.common import basics, handles, util
from hvdsparse.common import basics as _basics  # noqa: F401  Horovod's tests use mpi_ops._basics
from hvdsparse.common.basics import (init, shutdown, is_initialized, start_timeline,  # noqa: F401
                                     stop_timeline, size, local_size, cross_size, rank,
                                     local_rank, cross_rank, is_homogeneous,
                                     mpi_threads_supported, mpi_enabled, mpi_built, gloo_enabled,
                                     gloo_built, nccl_built, ddl_built, ccl_built, cuda_built,
                                     rocm_built, require_init)
from hvdsparse.common.gradients import reducescatter_grad
from hvdsparse.common.ops import (Average, Sum, Adasum, Min, Max, Product,  # noqa: F401
                                  check_op, check_sparse_op, resolve_op)
from hvdsparse.common.process_sets import (ProcessSet, global_process_set,  # noqa: F401
                                           add_process_set, remove_process_set, root_index,
                                           set_id)
from hvdsparse.common.splits import check_splits


from hvdsparse.tensorflow.compression import Compression
from hvdsparse.tensorflow.sparse_calls import sparse_allreduce_many
from hvdsparse.tensorflow.runtime_calls import (  # noqa: F401
    HorovodAbortedError, HorovodInvalidArgumentError, HorovodPreconditionError,
    HorovodUnknownError, TFErrorClasses, _GRAPH_KIND, _NP_FROM_C, _Op, _TO_C, _c_dtype, _complete,
    _enqueue, _executing_eagerly, _name, _opts, _prepare, _run, _runtime_output, _start_allgather,
    _start_allreduce, _start_alltoall, _start_broadcast, _start_reducescatter, _to_tf, _view)


# ---- allreduce -------------------------------------------------------------------------------
def _raw_allreduce(tensors, name, op, prescale, postscale, process_set, kind="allreduce"):
    require_init()
    ps_id = set_id(process_set)
    full = _name(kind, name, ps_id)

    def body(arrays):
        return _complete([_start_allreduce(arrays, full, ps_id, op, prescale, postscale)])[0]
    outs = _run(body, tensors, [t.dtype for t in tensors], in_place=True)
    for o, t in zip(outs, tensors):
        o.set_shape(t.shape)
    return outs


def _allreduce(tensor, name=None, op=Sum, prescale_factor=1.0, postscale_factor=1.0,
               process_set=global_process_set, ignore_name_scope=False):
    """Differentiable dense allreduce; the gradient is the allreduce of the gradient with the
    same op and factors."""
    tensor = _prepare(tensor)

    @tf.custom_gradient
    def fn(x):
        y = _raw_allreduce([x], name, op, prescale_factor, postscale_factor, process_set)[0]

        def grad(dy):
            return _allreduce(dy, None, op, prescale_factor, postscale_factor, process_set)
        return y, grad
    return fn(tensor)


def _allgather_slices(slices, name, op, prescale, postscale, process_set):
    """Horovod's path, for tf.IndexedSlices without a dense_shape: allgather values and
    indices (duplicates stay). Average divides by the set size with `/`, as Horovod's (integer
    values come back as floats); pre/postscale raise NotImplementedError, as Horovod's."""
    if prescale != 1.0 or postscale != 1.0:
        raise NotImplementedError("Pre/postscale_factor are not supported with tf.IndexedSlices "
                                  "without a dense_shape")
    values = allgather(slices.values, name=None if name is None else name + ".values",
                       process_set=process_set)
    indices = allgather(slices.indices, name=None if name is None else name + ".indices",
                        process_set=process_set)
    if op == Average:
        values = values / tf.cast(process_set.size(), values.dtype)
    return tf.IndexedSlices(values, indices, dense_shape=slices.dense_shape)


def _sparse_allreduce(slices, name, op, prescale_factor, postscale_factor, process_set,
                      algorithm=None):
    """Sum or Average of tf.IndexedSlices through the runtime's sparse allreduce (rows of
    dense_shape[1:]); pre- and postscale multiply the result's values."""
    check_sparse_op(op)
    if slices.dense_shape is None:
        return _allgather_slices(slices, name, op, prescale_factor, postscale_factor,
                                 process_set)
    return sparse_allreduce_many([slices], [name], op, prescale_factor, postscale_factor,
                                 process_set, algorithm)[0]


def allreduce(tensor, average=None, device_dense='', device_sparse='', compression=None,
              op=None, prescale_factor=1.0, postscale_factor=1.0, name=None,
              process_set=global_process_set, ignore_name_scope=False, sparse_algorithm=None):
    """Reduces a tensor over the ranks of process_set (op defaults to Average).

    tf.IndexedSlices (Sum or Average) go through the runtime's sparse allreduce as rows of
    dense_shape[1:] and come back as tf.IndexedSlices with sorted unique indices (duplicates
    summed; every row when the result came out dense). sparse_algorithm forces its algorithm
    ("dense", "allgather", "ssar_recursive_doubling", "ssar_split_allgather",
    "dsar_split_allgather", "zen"; None: the cost model). IndexedSlices without a dense_shape
    are allgathered as Horovod does. compression: Compression.none/fp16/bf16 (dense tensors
    only)."""
    op = resolve_op(average, op)
    if isinstance(tensor, tf.IndexedSlices):
        return _sparse_allreduce(tensor, name, op, prescale_factor, postscale_factor,
                                 process_set, sparse_algorithm)
    compression = compression or Compression.none
    compressed, ctx = compression.compress(_prepare(tensor))
    summed = _allreduce(compressed, name, op, prescale_factor, postscale_factor, process_set)
    return compression.decompress(summed, ctx)


def _grouped_raw(tensors, name, op, prescale, postscale, process_set):
    tensors = [_prepare(t) for t in tensors]

    @tf.custom_gradient
    def fn(*xs):
        ys = _raw_allreduce(list(xs), name, op, prescale, postscale, process_set,
                            kind="grouped_allreduce")

        def grad(*dys):
            return _grouped_raw(list(dys), None, op, prescale, postscale, process_set)
        return ys, grad
    return list(fn(*tensors))


def grouped_allreduce(tensors, average=None, device_dense='', device_sparse='',
                      compression=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                      name=None, process_set=global_process_set, ignore_name_scope=False):
    """Allreduce of a list of tensors negotiated as one group. tf.IndexedSlices in the list go
    through the sparse allreduce separately."""
    op = resolve_op(average, op)
    tensors = list(tensors)
    if not tensors:
        return []
    compression = compression or Compression.none
    dense_idx = [i for i, t in enumerate(tensors) if not isinstance(t, tf.IndexedSlices)]
    results = [None] * len(tensors)
    for i, t in enumerate(tensors):
        if isinstance(t, tf.IndexedSlices):
            results[i] = _sparse_allreduce(t, None if name is None else "%s.%d" % (name, i), op,
                                           prescale_factor, postscale_factor, process_set)
    if dense_idx:
        comp = [compression.compress(_prepare(tensors[i])) for i in dense_idx]
        reduced = _grouped_raw([c[0] for c in comp], name, op, prescale_factor,
                               postscale_factor, process_set)
        for i, r, (_, ctx) in zip(dense_idx, reduced, comp):
            results[i] = compression.decompress(r, ctx)
    return results


# ---- allgather -------------------------------------------------------------------------------
def _raw_allgathers(tensors, names, process_set):
    """Allgathers enqueued together and waited for together (one py_function in a graph)."""
    require_init()
    ps_id = set_id(process_set)
    fulls = [_name("allgather", n, ps_id) for n in names]

    def body(arrays):
        return _complete([_start_allgather(a, f, ps_id) for a, f in zip(arrays, fulls)])
    outs = _run(body, tensors, [t.dtype for t in tensors], in_place=True)
    for o, t in zip(outs, tensors):
        if t.shape.rank is not None:
            o.set_shape([None] + t.shape.as_list()[1:])
    return outs


def _allgather_grad(x, dy, process_set):
    """This rank's slice of the averaged gradient."""
    g = _allreduce(dy, op=Average, process_set=process_set)
    d = tf.reshape(tf.shape(x, out_type=tf.int64)[0], [1])
    dims = _raw_allgathers([d], [None], process_set)[0]
    offset = tf.reduce_sum(dims[:process_set.rank()])
    return g[offset:offset + d[0]]


def allgather(tensor, name=None, ignore_name_scope=False, process_set=global_process_set):
    """Concatenates every rank's tensor along dimension 0 (first dimensions may differ). The
    gradient is this rank's slice of the averaged gradient."""
    return _allgathers([tensor], [name], process_set)[0]


def grouped_allgather(tensors, name=None, ignore_name_scope=False,
                      process_set=global_process_set):
    """Allgathers of several tensors (each named "<name>_<i>of<n>"), enqueued together: one
    operation in a graph, as Horovod's grouped op."""
    n = len(tensors)
    return _allgathers(tensors, [None if name is None else "%s_%dof%d" % (name, i + 1, n)
                                 for i in range(n)], process_set)


def _allgathers(tensors, names, process_set):
    tensors = [_prepare(t) for t in tensors]
    if not tensors:
        return []

    @tf.custom_gradient
    def fn(*xs):
        ys = _raw_allgathers(list(xs), names, process_set)

        def grad(*dys):
            return [_allgather_grad(x, dy, process_set) for x, dy in zip(xs, dys)]
        return ys, grad
    return list(fn(*tensors))


# ---- broadcast -------------------------------------------------------------------------------
def _raw_broadcast(tensor, root_rank, name, process_set):
    require_init()
    ps_id = set_id(process_set)
    full = _name("broadcast", name, ps_id)
    root = root_index(root_rank, process_set)

    def body(arrays):
        return [_complete([_start_broadcast(arrays[0], full, ps_id, root)])[0]]
    out = _run(body, [tensor], [tensor.dtype], in_place=True)[0]
    out.set_shape(tensor.shape)
    return out


def broadcast(tensor, root_rank, name=None, ignore_name_scope=False,
              process_set=global_process_set):
    """Returns root_rank's tensor on every rank. The gradient is the ranks' averaged gradient on
    the root and zero elsewhere, as Horovod's."""
    tensor = _prepare(tensor)

    @tf.custom_gradient
    def fn(x):
        y = _raw_broadcast(x, root_rank, name, process_set)

        def grad(dy):
            g = _allreduce(dy, op=Average, process_set=process_set)
            if rank() != root_rank:
                g = g * 0
            return g
        return y, grad
    return fn(tensor)


def _broadcast_group(tensors, root_rank, names, process_set):
    """Broadcasts enqueued together and waited for together (one py_function in a graph)."""
    require_init()
    ps_id = set_id(process_set)
    root = root_index(root_rank, process_set)
    fulls = [_name("broadcast", n, ps_id) for n in names]
    tensors = [_prepare(t) for t in tensors]

    def body(arrays):
        return _complete([_start_broadcast(a, f, ps_id, root) for a, f in zip(arrays, fulls)])
    outs = _run(body, tensors, [t.dtype for t in tensors], in_place=True)
    for o, t in zip(outs, tensors):
        o.set_shape(t.shape)
    return outs


def broadcast_(variables, root_rank, name=None, process_set=global_process_set):
    """In-place broadcast of tf.Variables (resource or TF1 reference variables), enqueued
    together. Returns the variables' values after the broadcast (a list for a list), as
    Horovod's; in a graph, evaluating them runs the broadcast."""
    single = not isinstance(variables, (list, tuple))
    variables = [variables] if single else list(variables)
    names = [None if name is None else (name if single else "%s_%d" % (name, i))
             for i in range(len(variables))]
    values = _broadcast_group(variables, root_rank, names, process_set) if variables else []
    assigns = [v.assign(val) for v, val in zip(variables, values)]
    with tf.control_dependencies([] if _executing_eagerly() else assigns):
        out = [v.read_value() for v in variables]
    return out[0] if single else out


# ---- alltoall --------------------------------------------------------------------------------
def _raw_alltoall(tensor, splits, name, process_set):
    require_init()
    ps_id = set_id(process_set)
    full = _name("alltoall", name, ps_id)
    n = process_set.size()
    if tensor.shape.rank == 0:
        raise ValueError("alltoall needs a tensor of at least one dimension.")
    inputs = [tensor] if splits is None else [tensor, tf.cast(splits, tf.int32)]

    def body(arrays):
        s = None if len(arrays) == 1 else np.asarray(arrays[1]).reshape(-1)
        s = check_splits(s, arrays[0].shape[0], n, HorovodInvalidArgumentError)
        out, received = _complete([_start_alltoall(arrays[0], s, full, ps_id)])[0]
        return [out, received]
    out, received = _run(body, inputs, [tensor.dtype, tf.int32], in_place=True)
    if tensor.shape.rank is not None:
        out.set_shape([None] + tensor.shape.as_list()[1:])
    received.set_shape([n])
    return out, received


def alltoall(tensor, splits=None, name=None, ignore_name_scope=False,
             process_set=global_process_set):
    """Sends splits[i] rows to rank i of the set and gathers the rows sent to this rank.
    Returns (output, received_splits) when splits are given, else the output, as Horovod's."""
    tensor = _prepare(tensor)
    if splits is not None:
        splits = tf.convert_to_tensor(splits)
        if splits.dtype not in (tf.int32, tf.int64):
            raise ValueError("splits must be of type int32 or int64, not %s" % splits.dtype.name)

    @tf.custom_gradient
    def fn(x):
        out, received = _raw_alltoall(x, splits, name, process_set)

        def grad(dy, _dr=None):
            g, _ = _raw_alltoall(dy, received, None, process_set)
            return g
        return (out, received), grad
    out, received = fn(tensor)
    return out if splits is None else (out, received)


# ---- reducescatter ---------------------------------------------------------------------------
def _raw_reducescatter(tensors, name, op, prescale, postscale, process_set, kind):
    require_init()
    ps_id = set_id(process_set)
    full = _name(kind, name, ps_id)
    for t in tensors:
        if t.shape.rank == 0:
            raise ValueError("Reducescatter does not support scalar (rank-zero) tensors.")

    def body(arrays):
        return _complete([_start_reducescatter(arrays, full, ps_id, op, prescale,
                                               postscale)])[0]
    outs = _run(body, tensors, [t.dtype for t in tensors], in_place=True)
    for o, t in zip(outs, tensors):
        if t.shape.rank is not None:
            o.set_shape([None] + t.shape.as_list()[1:])
    return outs


def _reducescatter_grad(dy, op, prescale, postscale, process_set):
    return reducescatter_grad(dy, op, prescale, postscale, process_set,
                              lambda g, ps: allgather(g, process_set=ps),
                              lambda g, factor: g * tf.cast(factor, g.dtype))


def reducescatter(tensor, device_dense='', compression=None, op=Average, name=None,
                  process_set=global_process_set, ignore_name_scope=False,
                  prescale_factor=1.0, postscale_factor=1.0):
    """Reduces over the ranks and scatters along dimension 0 (the first dim0 % size ranks get
    one extra row)."""
    compression = compression or Compression.none
    op = check_op(op)
    compressed, ctx = compression.compress(_prepare(tensor))

    @tf.custom_gradient
    def fn(x):
        y = _raw_reducescatter([x], name, op, prescale_factor, postscale_factor, process_set,
                               "reducescatter")[0]

        def grad(dy):
            return _reducescatter_grad(dy, op, prescale_factor, postscale_factor, process_set)
        return y, grad
    return compression.decompress(fn(compressed), ctx)


def grouped_reducescatter(tensors, device_dense='', compression=None, op=Average, name=None,
                          process_set=global_process_set, ignore_name_scope=False,
                          prescale_factor=1.0, postscale_factor=1.0):
    compression = compression or Compression.none
    op = check_op(op)
    comp = [compression.compress(_prepare(t)) for t in tensors]
    if not comp:
        return []

    @tf.custom_gradient
    def fn(*xs):
        ys = _raw_reducescatter(list(xs), name, op, prescale_factor, postscale_factor,
                                process_set, "grouped_reducescatter")

        def grad(*dys):
            return [_reducescatter_grad(d, op, prescale_factor, postscale_factor, process_set)
                    for d in dys]
        return ys, grad
    outs = fn(*[c[0] for c in comp])
    return [compression.decompress(o, c[1]) for o, c in zip(outs, comp)]


# ---- join, barrier, graph-side queries -------------------------------------------------------
def _join_eager():
    return np.int32(handles.join(TFErrorClasses))


def join():
    """This rank has no more batches: it contributes zeros to the others' allreduces until every
    rank joined. Returns the last rank that joined (an int32 tensor)."""
    if _executing_eagerly():
        return tf.constant(_join_eager())
    out = tf.py_function(lambda: tf.constant(_join_eager()), [], Tout=tf.int32)
    out.set_shape([])
    return out


def _barrier_eager(ps_id):
    handles.barrier(ps_id, TFErrorClasses)
    return np.int32(0)


def barrier(process_set=global_process_set):
    """Blocks until every rank of the set reached the barrier."""
    ps_id = set_id(process_set)
    if _executing_eagerly():
        _barrier_eager(ps_id)
        return None
    return tf.py_function(lambda: tf.constant(_barrier_eager(ps_id)), [], Tout=tf.int32)


def _const_op(value, name):
    return tf.constant(value, dtype=tf.int32, name=name)


def rank_op(name=None):
    """This rank as an int32 tensor (a constant: ranks do not change during a run)."""
    return _const_op(rank(), name)


def local_rank_op(name=None):
    return _const_op(local_rank(), name)


def size_op(process_set_id=0, name=None):
    from hvdsparse.common.process_sets import process_set_by_id
    ps = process_set_by_id(process_set_id)
    return _const_op(size() if ps is None or process_set_id == 0 else ps.size(), name)


def local_size_op(name=None):
    return _const_op(local_size(), name)


def process_set_included_op(process_set_id=0, name=None):
    from hvdsparse.common.process_sets import process_set_by_id
    ps = process_set_by_id(process_set_id)
    return _const_op(1 if ps is None or process_set_id == 0 else int(ps.included()), name)


def _reset(event):
    util.reset_counters()


basics.register_reset_hook(_reset)
