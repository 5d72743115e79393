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
import ctypes

import numpy as np
import tensorflow as tf

from hvdsparse.common import _lib, basics, util
from hvdsparse.common.basics import (init, shutdown, is_initialized, start_timeline,  # noqa: F401
                                     stop_timeline, size, local_size, cross_size, rank,
                                     local_rank, cross_rank, is_homogeneous,
                                     mpi_threads_supported, mpi_enabled, mpi_built, gloo_enabled,
                                     gloo_built, nccl_built, ddl_built, ccl_built, cuda_built,
                                     rocm_built)
from hvdsparse.common.exceptions import HorovodInternalError
from hvdsparse.common.ops import Average, Sum, Adasum, Min, Max, Product, check_op  # noqa: F401
from hvdsparse.common.process_sets import (ProcessSet, global_process_set,  # noqa: F401
                                           add_process_set, remove_process_set)


# ---- errors ----------------------------------------------------------------------------------
class HorovodPreconditionError(tf.errors.FailedPreconditionError, HorovodInternalError):
    """Ranks disagreed about an operation (shape, dtype, op, root rank...)."""

    def __init__(self, message):
        tf.errors.FailedPreconditionError.__init__(self, None, None, message)


class HorovodAbortedError(tf.errors.AbortedError, HorovodInternalError):
    """A peer died or the runtime was shut down."""

    def __init__(self, message):
        tf.errors.AbortedError.__init__(self, None, None, message)


class HorovodUnknownError(tf.errors.UnknownError, HorovodInternalError):
    def __init__(self, message):
        tf.errors.UnknownError.__init__(self, None, None, message)


class HorovodInvalidArgumentError(tf.errors.InvalidArgumentError, ValueError):
    """Bad arguments detected by the runtime (duplicate names, bad splits)."""

    def __init__(self, message):
        tf.errors.InvalidArgumentError.__init__(self, None, None, message)


def _status_error(rc, msg):
    msg = msg or _lib.result_str(rc)
    if rc == _lib.PRECONDITION_ERROR:
        return HorovodPreconditionError(msg)
    if rc == _lib.INVALID_ARGUMENT:
        return HorovodInvalidArgumentError(msg)
    if rc in (_lib.SHUT_DOWN, _lib.REMOTE_ERROR):
        return HorovodAbortedError(msg)
    return HorovodUnknownError(msg)


# ---- dtypes ----------------------------------------------------------------------------------
_TO_C = {tf.uint8: _lib.UINT8, tf.int8: _lib.INT8, tf.uint16: _lib.UINT16, tf.int16: _lib.INT16,
         tf.int32: _lib.INT32, tf.int64: _lib.INT64, tf.float16: _lib.FLOAT16,
         tf.float32: _lib.FLOAT32, tf.float64: _lib.FLOAT64, tf.bool: _lib.BOOL,
         tf.bfloat16: _lib.BFLOAT16}
_NP_FROM_C = {c: tf.as_dtype(t).as_numpy_dtype for t, c in _TO_C.items()}


def _check_dtype(dtype):
    dtype = tf.as_dtype(dtype)
    if dtype not in _TO_C:
        raise ValueError("Tensor type %s is not supported." % dtype.name)
    return dtype


def _executing_eagerly():
    return tf.executing_eagerly()


def _require_init():
    if not _lib.lib().hvds_is_initialized():
        raise ValueError(basics.NOT_INITIALIZED)


def _set_id(process_set):
    if process_set.process_set_id is None:
        raise ValueError("Process set has not been registered: call hvd.add_process_set() "
                         "first.")
    return process_set.process_set_id


# ---- host buffers and runtime calls (eager; also the body of every py_function) ---------------
def _host(x):
    """A C-contiguous numpy array with the tensor's values (a copy or a read-only view)."""
    a = x.numpy() if hasattr(x, "numpy") else np.asarray(x)
    a = np.asarray(a)
    if a.ndim > _lib.MAX_DIMS:
        raise ValueError("Tensors of more than %d dimensions are not supported." % _lib.MAX_DIMS)
    return a if a.flags.c_contiguous else a.copy(order="C")  # keeps 0-d arrays 0-d


def _c_dtype(a):
    return _TO_C[_check_dtype(tf.as_dtype(a.dtype))]


def _view(a):
    v = _lib.Tensor()
    v.data = a.ctypes.data if a.size else ctypes.addressof(_ZERO)
    v.dtype = _c_dtype(a)
    v.device = -1
    v.ndim = a.ndim
    for i, d in enumerate(a.shape):
        v.shape[i] = d
    return v


_ZERO = ctypes.create_string_buffer(8)


def _enqueue(fn, *args):
    h = ctypes.c_int64(0)
    rc = fn(*args, ctypes.byref(h))
    if rc != _lib.SUCCESS:
        msg = _lib.last_error() or _lib.result_str(rc)
        if rc == _lib.INVALID_USAGE and "not been initialized" in msg:
            raise ValueError(basics.NOT_INITIALIZED)
        if rc in (_lib.INVALID_ARGUMENT, _lib.INVALID_USAGE):
            raise HorovodInvalidArgumentError(msg)
        if rc == _lib.NOT_SUPPORTED:
            raise NotImplementedError(msg)
        raise _status_error(rc, msg)
    return h.value


def _wait(handle):
    """Waits in slices (Ctrl-C stays live); raises on failure. Does not release the handle."""
    lib = _lib.lib()
    while True:
        rc = lib.hvds_wait(handle, 1000)
        if rc != _lib.TIMEOUT:
            break
    if rc != _lib.SUCCESS:
        raise _status_error(rc, _lib.handle_error(handle))


def _runtime_output(handle, i):
    """Copy of output i (runtime-owned memory) as a numpy array."""
    t = _lib.Tensor()
    basics.check(_lib.lib().hvds_handle_output(handle, i, ctypes.byref(t)), "output")
    out = np.empty([t.shape[d] for d in range(t.ndim)], dtype=_NP_FROM_C[t.dtype])
    if out.nbytes and t.data:
        ctypes.memmove(out.ctypes.data, t.data, out.nbytes)
    return out


class _Op:
    """One enqueued operation: its handle, the buffers it needs alive, how to get its result."""
    __slots__ = ("handle", "keep", "finish")

    def __init__(self, handle, keep, finish):
        self.handle, self.keep, self.finish = handle, keep, finish


def _complete(ops):
    """Waits for every op (even after a failure, so nothing stays in flight); returns results."""
    lib = _lib.lib()
    results, error = [], None
    for o in ops:
        try:
            _wait(o.handle)
            results.append(o.finish(o.handle))
        except Exception as e:  # noqa: BLE001
            error = error or e
            results.append(None)
        finally:
            lib.hvds_release(o.handle)
    if error is not None:
        raise error
    return results


def _opts(full_name, ps_id, op=Sum, prescale=1.0, postscale=1.0, root_rank=0):
    return _lib.op_options(full_name, ps_id, op, prescale, postscale, root_rank)


def _start_allreduce(arrays, full_name, ps_id, op, prescale, postscale):
    arrays = [_host(a) for a in arrays]
    outs = [np.empty_like(a) for a in arrays]
    opts = _opts(full_name, ps_id, op, prescale, postscale)
    lib = _lib.lib()
    n = len(arrays)
    if n == 1:
        vin, vout = _view(arrays[0]), _view(outs[0])
        h = _enqueue(lib.hvds_allreduce_async, ctypes.byref(vin), ctypes.byref(vout),
                     ctypes.byref(opts))
    else:
        vin = (_lib.Tensor * n)(*[_view(a) for a in arrays])
        vout = (_lib.Tensor * n)(*[_view(o) for o in outs])
        h = _enqueue(lib.hvds_grouped_allreduce_async, n, vin, vout, ctypes.byref(opts))
    return _Op(h, (arrays, outs, vin, vout, opts), lambda _h: outs)


def _start_allgather(array, full_name, ps_id):
    a = _host(array)
    if a.ndim == 0:
        raise ValueError("Allgather does not support scalar (rank-zero) tensors; reshape to "
                         "[1] first.")
    opts = _opts(full_name, ps_id)
    v = _view(a)
    h = _enqueue(_lib.lib().hvds_allgather_async, ctypes.byref(v), ctypes.byref(opts))
    return _Op(h, (a, v, opts), lambda hh: _runtime_output(hh, 0))


def _start_broadcast(array, full_name, ps_id, root_index):
    buf = np.array(_host(array), copy=True, order="C")
    opts = _opts(full_name, ps_id, root_rank=root_index)
    v = _view(buf)
    h = _enqueue(_lib.lib().hvds_broadcast_async, ctypes.byref(v), ctypes.byref(opts))
    return _Op(h, (buf, v, opts), lambda _h: buf)


def _start_alltoall(array, splits, full_name, ps_id):
    a = _host(array)
    opts = _opts(full_name, ps_id)
    keep = [a, opts]
    if splits is not None:
        arr = (ctypes.c_int32 * max(1, len(splits)))(*splits)
        opts.splits = ctypes.cast(arr, ctypes.POINTER(ctypes.c_int32))
        opts.nsplits = len(splits)
        keep.append(arr)
    v = _view(a)
    keep.append(v)
    h = _enqueue(_lib.lib().hvds_alltoall_async, ctypes.byref(v), ctypes.byref(opts))

    def finish(hh):
        out = _runtime_output(hh, 0)
        ptr = ctypes.POINTER(ctypes.c_int32)()
        n = _lib.lib().hvds_handle_splits(hh, ctypes.byref(ptr))
        return out, np.array([ptr[i] for i in range(max(n, 0))], dtype=np.int32)
    return _Op(h, keep, finish)


def _start_reducescatter(arrays, full_name, ps_id, op, prescale, postscale):
    arrays = [_host(a) for a in arrays]
    for a in arrays:
        if a.ndim == 0:
            raise ValueError("Reducescatter does not support scalar (rank-zero) tensors.")
    opts = _opts(full_name, ps_id, op, prescale, postscale)
    lib = _lib.lib()
    n = len(arrays)
    if n == 1:
        vin = _view(arrays[0])
        h = _enqueue(lib.hvds_reducescatter_async, ctypes.byref(vin), ctypes.byref(opts))
    else:
        vin = (_lib.Tensor * n)(*[_view(a) for a in arrays])
        h = _enqueue(lib.hvds_grouped_reducescatter_async, n, vin, ctypes.byref(opts))
    return _Op(h, (arrays, vin, opts), lambda hh: [_runtime_output(hh, i) for i in range(n)])


# ---- naming and the eager / graph switch -----------------------------------------------------
_GRAPH_KIND = {"allreduce": "HorovodAllreduce", "grouped_allreduce": "HorovodGroupedAllreduce",
               "allgather": "HorovodAllgather", "broadcast": "HorovodBroadcast",
               "alltoall": "HorovodAlltoall", "reducescatter": "HorovodReducescatter",
               "grouped_reducescatter": "HorovodGroupedReducescatter"}


def _name(kind, name, ps_id):
    """The negotiation name: eager names come from the run's counters; graph names are fixed at
    trace time from the graph's own unique names (identical on every rank tracing the same
    program)."""
    if name is not None or _executing_eagerly():
        return util.op_name(kind, name, ps_id)
    graph = tf.compat.v1.get_default_graph()
    unique = graph.unique_name(_GRAPH_KIND.get(kind, kind), mark_as_used=True)
    if ps_id:
        return "%s.graph.ps%d.%s" % (kind, ps_id, unique)
    return "%s.graph.%s" % (kind, unique)


def _to_tf(a):
    return tf.convert_to_tensor(a)


def _run(body, inputs, tout):
    """Runs body(list of numpy arrays) -> list of numpy arrays eagerly, or as a py_function."""
    if _executing_eagerly():
        return [_to_tf(o) for o in body([_host(x) for x in inputs])]

    @tf.autograph.experimental.do_not_convert
    def py(*xs):
        return [_to_tf(o) for o in body([_host(x) for x in xs])]
    outs = tf.py_function(py, list(inputs), Tout=list(tout))
    return list(outs)


def _prepare(tensor):
    if isinstance(tensor, tf.IndexedSlices):
        raise ValueError("tf.IndexedSlices are not supported by this operation.")
    t = tf.convert_to_tensor(tensor)
    _check_dtype(t.dtype)
    if t.shape.rank is not None and t.shape.rank > _lib.MAX_DIMS:
        raise ValueError("Tensors of more than %d dimensions are not supported." % _lib.MAX_DIMS)
    return t


def _resolve_op(average, op):
    if op is not None and average is not None:
        raise ValueError("The op parameter supersedes average. Please provide only one of them.")
    if average is not None:
        op = Average if average else Sum
    if op is None:
        op = Average
    return check_op(op)


# ---- allreduce -------------------------------------------------------------------------------
def _raw_allreduce(tensors, name, op, prescale, postscale, process_set, kind="allreduce"):
    _require_init()
    ps_id = _set_id(process_set)
    full = _name(kind, name, ps_id)

    def body(arrays):
        return _complete([_start_allreduce(arrays, full, ps_id, op, prescale, postscale)])[0]
    outs = _run(body, tensors, [t.dtype for t in tensors])
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


def _sparse_allreduce(slices, name, op, prescale_factor, postscale_factor, process_set):
    if op == Adasum:
        raise NotImplementedError("The Adasum reduction does not currently support sparse "
                                  "tensors. As a workaround please pass sparse_as_dense=True "
                                  "to DistributedOptimizer")
    if op not in (Average, Sum):
        raise NotImplementedError("Only Sum and Average ops are supported with "
                                  "tf.IndexedSlices")
    if prescale_factor != 1.0 or postscale_factor != 1.0:
        raise NotImplementedError("Pre/postscale_factor are not supported with "
                                  "tf.IndexedSlices")
    values = allgather(slices.values, name=None if name is None else name + ".values",
                       process_set=process_set)
    indices = allgather(slices.indices, name=None if name is None else name + ".indices",
                        process_set=process_set)
    if op == Average:
        values = tf.math.divide(values, tf.cast(process_set.size(), values.dtype))
    return tf.IndexedSlices(values, indices, dense_shape=slices.dense_shape)


def allreduce(tensor, average=None, device_dense='', device_sparse='', compression=None,
              op=None, prescale_factor=1.0, postscale_factor=1.0, name=None,
              process_set=global_process_set, ignore_name_scope=False):
    """Reduces a tensor over the ranks of process_set (op defaults to Average).

    tf.IndexedSlices are allgathered (values and indices) as Horovod does; Average divides the
    values by the set size. compression: Compression.none/fp16/bf16 (dense tensors only)."""
    from hvdsparse.tensorflow.compression import Compression
    op = _resolve_op(average, op)
    if isinstance(tensor, tf.IndexedSlices):
        return _sparse_allreduce(tensor, name, op, prescale_factor, postscale_factor,
                                 process_set)
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
    """Allreduce of a list of tensors negotiated as one group. tf.IndexedSlices in the list are
    allgathered separately."""
    from hvdsparse.tensorflow.compression import Compression
    op = _resolve_op(average, op)
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
def _raw_allgather(tensor, name, process_set):
    _require_init()
    ps_id = _set_id(process_set)
    full = _name("allgather", name, ps_id)

    def body(arrays):
        return [_complete([_start_allgather(arrays[0], full, ps_id)])[0]]
    out = _run(body, [tensor], [tensor.dtype])[0]
    if tensor.shape.rank is not None:
        out.set_shape([None] + tensor.shape.as_list()[1:])
    return out


def allgather(tensor, name=None, ignore_name_scope=False, process_set=global_process_set):
    """Concatenates every rank's tensor along dimension 0 (first dimensions may differ). The
    gradient is this rank's slice of the averaged gradient."""
    tensor = _prepare(tensor)

    @tf.custom_gradient
    def fn(x):
        y = _raw_allgather(x, name, process_set)

        def grad(dy):
            g = _allreduce(dy, op=Average, process_set=process_set)
            d = tf.reshape(tf.shape(x, out_type=tf.int64)[0], [1])
            dims = _raw_allgather(d, None, process_set)
            r = process_set.rank()
            offset = tf.reduce_sum(dims[:r])
            return g[offset:offset + d[0]]
        return y, grad
    return fn(tensor)


def grouped_allgather(tensors, name=None, ignore_name_scope=False,
                      process_set=global_process_set):
    """Allgather of several tensors (one allgather per tensor, named "<name>_<i>of<n>")."""
    tensors = list(tensors)
    base = name if name is not None else None
    n = len(tensors)
    return [allgather(t, name=None if base is None else "%s_%dof%d" % (base, i + 1, n),
                      process_set=process_set) for i, t in enumerate(tensors)]


# ---- broadcast -------------------------------------------------------------------------------
def _root_index(root_rank, process_set):
    """Horovod's root_rank is a global rank; the C API wants the rank within the set."""
    if process_set.process_set_id == 0:
        return int(root_rank)
    if root_rank not in process_set.ranks:
        raise ValueError("root_rank %d is not a member of %s" % (root_rank, process_set))
    return process_set.ranks.index(root_rank)


def _raw_broadcast(tensor, root_rank, name, process_set):
    _require_init()
    ps_id = _set_id(process_set)
    full = _name("broadcast", name, ps_id)
    root = _root_index(root_rank, process_set)

    def body(arrays):
        return [_complete([_start_broadcast(arrays[0], full, ps_id, root)])[0]]
    out = _run(body, [tensor], [tensor.dtype])[0]
    out.set_shape(tensor.shape)
    return out


def broadcast(tensor, root_rank, name=None, ignore_name_scope=False,
              process_set=global_process_set):
    """Returns root_rank's tensor on every rank. The gradient is the summed gradient on the root
    and zero elsewhere."""
    tensor = _prepare(tensor)

    @tf.custom_gradient
    def fn(x):
        y = _raw_broadcast(x, root_rank, name, process_set)

        def grad(dy):
            g = _allreduce(dy, op=Sum, process_set=process_set)
            if rank() != root_rank:
                g = g * 0
            return g
        return y, grad
    return fn(tensor)


def broadcast_(variables, root_rank, name=None, process_set=global_process_set):
    """In-place broadcast of tf.Variables (one op per variable); returns the variables."""
    single = not isinstance(variables, (list, tuple))
    variables = [variables] if single else list(variables)
    for i, v in enumerate(variables):
        vname = None if name is None else (name if single else "%s_%d" % (name, i))
        v.assign(_raw_broadcast(_prepare(v), root_rank, vname, process_set))
    return variables[0] if single else variables


# ---- alltoall --------------------------------------------------------------------------------
def _splits_list(splits, tensor_dim0, n):
    if splits is None:
        if tensor_dim0 is not None and tensor_dim0 % n != 0:
            raise HorovodInvalidArgumentError(
                "tensor(s) must have first dimension divisible by the number of ranks %d "
                "(got %d): pass splits" % (n, tensor_dim0))
        return None
    s = [int(x) for x in np.asarray(splits.numpy() if hasattr(splits, "numpy") else splits)
         .reshape(-1)]
    if len(s) != n:
        raise HorovodInvalidArgumentError("splits has %d entries but the process set has %d "
                                          "ranks" % (len(s), n))
    if any(x < 0 for x in s):
        raise HorovodInvalidArgumentError("splits must be non-negative: %s" % s)
    if tensor_dim0 is not None and sum(s) != tensor_dim0:
        raise HorovodInvalidArgumentError(
            "Sum of splits entries %d does not match the first dimension %d of the tensor"
            % (sum(s), tensor_dim0))
    return s


def _raw_alltoall(tensor, splits, name, process_set):
    _require_init()
    ps_id = _set_id(process_set)
    full = _name("alltoall", name, ps_id)
    n = process_set.size()
    if tensor.shape.rank == 0:
        raise ValueError("alltoall needs a tensor of at least one dimension.")
    inputs = [tensor] if splits is None else [tensor, tf.cast(splits, tf.int32)]

    def body(arrays):
        s = _splits_list(arrays[1] if len(arrays) > 1 else None, arrays[0].shape[0], n)
        out, received = _complete([_start_alltoall(arrays[0], s, full, ps_id)])[0]
        return [out, received]
    out, received = _run(body, inputs, [tensor.dtype, tf.int32])
    if tensor.shape.rank is not None:
        out.set_shape([None] + tensor.shape.as_list()[1:])
    received.set_shape([n])
    return out, received


def alltoall(tensor, splits=None, name=None, ignore_name_scope=False,
             process_set=global_process_set):
    """Sends splits[i] rows to rank i of the set and gathers the rows sent to this rank.
    Returns (output, received_splits), as Horovod's TensorFlow alltoall."""
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
    return fn(tensor)


# ---- reducescatter ---------------------------------------------------------------------------
def _raw_reducescatter(tensors, name, op, prescale, postscale, process_set, kind):
    _require_init()
    ps_id = _set_id(process_set)
    full = _name(kind, name, ps_id)
    for t in tensors:
        if t.shape.rank == 0:
            raise ValueError("Reducescatter does not support scalar (rank-zero) tensors.")

    def body(arrays):
        return _complete([_start_reducescatter(arrays, full, ps_id, op, prescale,
                                               postscale)])[0]
    outs = _run(body, tensors, [t.dtype for t in tensors])
    for o, t in zip(outs, tensors):
        if t.shape.rank is not None:
            o.set_shape([None] + t.shape.as_list()[1:])
    return outs


def _reducescatter_grad(dy, op, prescale, postscale, process_set):
    g = allgather(dy, process_set=process_set)
    scale = prescale * postscale * (process_set.size() if op == Sum else 1)
    return g * tf.cast(scale, g.dtype) if scale != 1 else g


def _check_rs_op(op):
    op = check_op(op)
    return op


def reducescatter(tensor, device_dense='', compression=None, op=Average, name=None,
                  process_set=global_process_set, ignore_name_scope=False,
                  prescale_factor=1.0, postscale_factor=1.0):
    """Reduces over the ranks and scatters along dimension 0 (the first dim0 % size ranks get
    one extra row)."""
    from hvdsparse.tensorflow.compression import Compression
    compression = compression or Compression.none
    op = _check_rs_op(op)
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
    from hvdsparse.tensorflow.compression import Compression
    compression = compression or Compression.none
    op = _check_rs_op(op)
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
    _require_init()
    h = _enqueue(_lib.lib().hvds_join_async)
    lib = _lib.lib()
    try:
        _wait(h)
        return np.int32(lib.hvds_handle_join_rank(h))
    finally:
        lib.hvds_release(h)


def join():
    """This rank has no more batches: it contributes zeros to the others' allreduces until every
    rank joined. Returns the last rank that joined (an int32 tensor)."""
    if _executing_eagerly():
        return tf.constant(_join_eager())
    out = tf.py_function(lambda: tf.constant(_join_eager()), [], Tout=tf.int32)
    out.set_shape([])
    return out


def _barrier_eager(ps_id):
    _require_init()
    h = _enqueue(_lib.lib().hvds_barrier_async, ps_id)
    lib = _lib.lib()
    try:
        _wait(h)
    finally:
        lib.hvds_release(h)
    return np.int32(0)


def barrier(process_set=global_process_set):
    """Blocks until every rank of the set reached the barrier."""
    ps_id = _set_id(process_set)
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
