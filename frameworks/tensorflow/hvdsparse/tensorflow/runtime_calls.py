"""The machinery under the TensorFlow collectives: error classes, dtype checks, host buffers and
the runtime's C calls (eager; also the body of every py_function), operation names, and the
eager / graph switch. See mpi_ops.py for how the pieces are used."""
import ctypes

import numpy as np
import tensorflow as tf

from hvdsparse.common import _lib, basics, util
from hvdsparse.common import sparse as csparse
from hvdsparse.common.exceptions import HorovodInternalError
from hvdsparse.common.ops import Average, Sum, check_op  # noqa: F401

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


def _opts(full_name, ps_id, op=Sum, prescale=1.0, postscale=1.0, root_rank=0,
          sparse_algorithm=None, sparse_detect=None):
    return _lib.op_options(full_name, ps_id, op, prescale, postscale, root_rank,
                           sparse_algorithm, sparse_detect)


def _start_allreduce(arrays, full_name, ps_id, op, prescale, postscale, sparse_detect=None,
                     sparse_algorithm=None):
    """sparse_detect: the runtime may take the sparse path for mostly-zero tensors (same
    result); sparse_algorithm forces that path's algorithm."""
    arrays = [_host(a) for a in arrays]
    outs = [np.empty_like(a) for a in arrays]
    opts = _opts(full_name, ps_id, op, prescale, postscale, sparse_algorithm=sparse_algorithm,
                 sparse_detect=sparse_detect)
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


def _copy_out(ptr, count, np_dtype):
    out = np.empty(count, dtype=np_dtype)
    if out.nbytes and ptr:
        ctypes.memmove(out.ctypes.data, ptr, out.nbytes)
    return out


def _start_sparse_allreduce(values, indices, dense_shape, full_name, ps_id, op, algorithm,
                            prescale=1.0, postscale=1.0, quant_bits=0):
    """Row-sparse allreduce of tf.IndexedSlices parts (ROWS format: values [nnz, ...] are rows
    of dense_shape[1:]). Indices travel as int32 when dense_shape[0] allows, and come back in
    their own dtype; pre- and postscale multiply the result; quant_bits 2/4/8 quantizes the
    values of the gather after the full-precision reduce. finish -> (values [m, ...],
    indices [m], algorithm): sorted unique indices, or every row when the runtime's result came
    out dense."""
    shape = [int(d) for d in _host(dense_shape).reshape(-1)]
    v, i = _host(values), _host(indices).reshape(-1)
    if not shape or v.ndim != len(shape) or list(v.shape[1:]) != shape[1:] or \
            v.shape[0] != i.size:
        raise HorovodInvalidArgumentError(
            "tf.IndexedSlices with values of shape %s and %d indices do not describe rows of a "
            "tensor of shape %s" % (list(v.shape), i.size, shape))
    if i.dtype not in (np.int32, np.int64):
        raise HorovodInvalidArgumentError("tf.IndexedSlices indices must be int32 or int64, "
                                          "not %s" % i.dtype)
    wire = csparse.wire_index_dtype(shape[0])
    wire_np = np.int32 if wire == _lib.INT32 else np.int64
    if i.dtype != wire_np:  # saturate: an index beyond int32 stays out of range
        i = np.clip(i, -2 ** 31, 2 ** 31 - 1).astype(wire_np) if wire == _lib.INT32 \
            else i.astype(np.int64)
    st = csparse.tensor(_lib.SPARSE_ROWS, i.ctypes.data if i.size else None, wire,
                        v.ctypes.data if v.size else None, _c_dtype(v), i.size, shape)
    opts = _opts(full_name, ps_id, op, prescale, postscale, sparse_algorithm=algorithm)
    opts.sparse_quant_bits = quant_bits
    h = _enqueue(csparse.enqueue_fn(), ctypes.byref(st), None, ctypes.byref(opts))
    index_np = _host(indices).dtype

    def finish(hh):
        res = csparse.result(hh)
        row = int(np.prod(shape[1:], dtype=np.int64))
        if res.is_dense:
            vals = _copy_out(res.values, shape[0] * row, v.dtype).reshape(shape)
            return vals, np.arange(shape[0], dtype=index_np), res.algorithm
        idx = _copy_out(res.indices, res.nnz, wire_np).astype(index_np, copy=False)
        vals = _copy_out(res.values, res.nnz * row, v.dtype).reshape([res.nnz] + shape[1:])
        return vals, idx, res.algorithm
    return _Op(h, (v, i, st, opts), finish)


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
               "sparse_allreduce": "HorovodSparseAllreduce",
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
