"""The machinery under the TensorFlow collectives: error classes, dtype checks, host buffers and
the runtime's C calls (eager; also the body of every py_function), operation names, and the
eager / graph switch. See mpi_ops.py for how the pieces are used."""
import ctypes
import functools

import numpy as np
import tensorflow as tf

from hvdsparse.common import _lib, handles, util
from hvdsparse.common import sparse as csparse
from hvdsparse.common.errors import ErrorClasses
from hvdsparse.common.exceptions import HorovodInternalError
from hvdsparse.common.ops import Sum
from hvdsparse.tensorflow import dlpack_views, graph_mode

graph_mode.reserve_inter_op_threads()

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


class TFErrorClasses(ErrorClasses):
    """Horovod's errors as TensorFlow error types (each a subclass of what it replaces)."""
    invalid_argument = HorovodInvalidArgumentError
    precondition = HorovodPreconditionError
    aborted = HorovodAbortedError
    unknown = HorovodUnknownError


_enqueue = functools.partial(handles.enqueue, classes=TFErrorClasses)


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
    return _lib.tensor_view(a.ctypes.data if a.size else None, _c_dtype(a), a.shape)


def _runtime_output(handle, i):
    """Copy of output i (runtime-owned memory) as a numpy array."""
    t = handles.output(handle, i)
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
    return handles.finish_all(ops, _finish)


def _finish(op):
    try:
        handles.wait_or_raise(op.handle, TFErrorClasses)
        return op.finish(op.handle)
    finally:
        _lib.lib().hvds_release(op.handle)


def _opts(full_name, ps_id, op=Sum, prescale=1.0, postscale=1.0, root_rank=0,
          sparse_algorithm=None, sparse_detect=None):
    return _lib.op_options(full_name, ps_id, op, prescale, postscale, root_rank,
                           sparse_algorithm, sparse_detect)


def _start_allreduce(arrays, full_name, ps_id, op, prescale, postscale, sparse_detect=None,
                     sparse_algorithm=None):
    """sparse_detect: the runtime may take the sparse path for mostly-zero tensors (same
    result); sparse_algorithm forces that path's algorithm. An eager GPU tensor that
    dlpack_views takes stays on its GPU, its result a TensorFlow tensor there; the others go
    through host numpy arrays."""
    arrays = [a if dlpack_views.takes(a) else _host(a) for a in arrays]
    outs, vin, vout, keep = [], [], [], []
    for a in arrays:
        if isinstance(a, np.ndarray):
            out = np.empty_like(a)
            outs.append(out)
            vin.append(_view(a))
            vout.append(_view(out))
            continue
        c_dtype = _TO_C[_check_dtype(a.dtype)]
        out = dlpack_views.empty_like(a)
        src, dst = dlpack_views.View(a, c_dtype), dlpack_views.View(out, c_dtype)
        outs.append(out)
        vin.append(src.c)
        vout.append(dst.c)
        keep.append((src, dst))
    devices = {v.device for v in vin}
    dlpack_views.synchronize(devices if keep else set())
    opts = _opts(full_name, ps_id, op, prescale, postscale, sparse_algorithm=sparse_algorithm,
                 sparse_detect=sparse_detect)
    lib = _lib.lib()
    n = len(arrays)
    if n == 1:
        vin, vout = vin[0], vout[0]
        h = _enqueue(lib.hvds_allreduce_async, ctypes.byref(vin), ctypes.byref(vout),
                     ctypes.byref(opts))
    else:
        vin = (_lib.Tensor * n)(*vin)
        vout = (_lib.Tensor * n)(*vout)
        h = _enqueue(lib.hvds_grouped_allreduce_async, n, vin, vout, ctypes.byref(opts))

    def finish(hh):
        for d in devices if keep else ():
            dlpack_views.settle(hh, d)
        return outs
    return _Op(h, (arrays, outs, vin, vout, opts, keep), finish)


def _start_allgather(array, full_name, ps_id):
    a = array if dlpack_views.takes(array) else _host(array)
    if a.ndim == 0:
        raise ValueError("Allgather does not support scalar (rank-zero) tensors; reshape to "
                         "[1] first.")
    opts = _opts(full_name, ps_id)
    if not isinstance(a, np.ndarray):
        op = _start_sized_on_device([a], opts, _lib.lib().hvds_allgather_async, 1)
        outs_of = op.finish
        op.finish = lambda hh: outs_of(hh)[0]
        return op
    v = _view(a)
    h = _enqueue(_lib.lib().hvds_allgather_async, ctypes.byref(v), ctypes.byref(opts))
    return _Op(h, (a, v, opts), lambda hh: _runtime_output(hh, 0))


def _start_sized_on_device(tensors, opts, c_fn, n_out, with_splits=False):
    """An allgather, alltoall or (grouped) reducescatter of eager GPU tensors in place: the
    inputs through their DLPack views, the outputs made on their GPU by the allocation callback
    (dlpack_views.Outputs). finish -> the n_out outputs (a list; alltoall: (output, splits))."""
    c_dtype = _TO_C[_check_dtype(tensors[0].dtype)]
    views = [dlpack_views.View(t, c_dtype) for t in tensors]
    devices = {v.device for v in views}
    dlpack_views.synchronize(devices)
    outputs = dlpack_views.Outputs(opts, tensors[0])
    n = len(views)
    vin = (_lib.Tensor * n)(*[v.c for v in views])
    try:
        if n == 1:
            h = _enqueue(c_fn, ctypes.byref(vin[0]), ctypes.byref(opts))
        else:
            h = _enqueue(c_fn, n, vin, ctypes.byref(opts))
    except BaseException:
        outputs.close()
        raise

    def finish(hh):
        try:
            for d in devices:
                dlpack_views.settle(hh, d)
            outs = [outputs.take(hh, i) for i in range(n_out)]
        finally:
            outputs.close()
        if with_splits:
            return outs[0], np.array(handles.received_splits(hh), dtype=np.int32)
        return outs
    return _Op(h, (tensors, views, vin, opts), finish)


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
    """array: a host array, or an eager GPU tensor that dlpack_views takes, broadcast in a copy
    of its own on its GPU."""
    opts = _opts(full_name, ps_id, root_rank=root_index)
    if dlpack_views.takes(array):
        buf = dlpack_views.copy(array)
        view = dlpack_views.View(buf, _TO_C[_check_dtype(buf.dtype)])
        dlpack_views.synchronize({view.device})
        v = view.c

        def finish(hh):
            dlpack_views.settle(hh, view.device)
            return buf
        h = _enqueue(_lib.lib().hvds_broadcast_async, ctypes.byref(v), ctypes.byref(opts))
        return _Op(h, (buf, view, v, opts), finish)
    buf = np.array(_host(array), copy=True, order="C")
    v = _view(buf)
    h = _enqueue(_lib.lib().hvds_broadcast_async, ctypes.byref(v), ctypes.byref(opts))
    return _Op(h, (buf, v, opts), lambda _h: buf)


def _start_alltoall(array, splits, full_name, ps_id):
    a = array if dlpack_views.takes(array) else _host(array)
    opts = _opts(full_name, ps_id)
    keep = [a, opts]
    if splits is not None:
        keep.append(_lib.set_splits(opts, splits))
    if not isinstance(a, np.ndarray):
        op = _start_sized_on_device([a], opts, _lib.lib().hvds_alltoall_async, 1, True)
        op.keep = (op.keep, keep)
        return op
    v = _view(a)
    keep.append(v)
    h = _enqueue(_lib.lib().hvds_alltoall_async, ctypes.byref(v), ctypes.byref(opts))

    def finish(hh):
        return _runtime_output(hh, 0), np.array(handles.received_splits(hh), dtype=np.int32)
    return _Op(h, keep, finish)


def _start_reducescatter(arrays, full_name, ps_id, op, prescale, postscale):
    on_device = arrays and all(dlpack_views.takes(a) for a in arrays) and \
        len({(a.dtype, a.device) for a in arrays}) == 1
    arrays = arrays if on_device else [_host(a) for a in arrays]
    for a in arrays:
        if a.ndim == 0:
            raise ValueError("Reducescatter does not support scalar (rank-zero) tensors.")
    opts = _opts(full_name, ps_id, op, prescale, postscale)
    lib = _lib.lib()
    n = len(arrays)
    if on_device:
        return _start_sized_on_device(arrays, opts, lib.hvds_reducescatter_async if n == 1
                                      else lib.hvds_grouped_reducescatter_async, n)
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


def _run(body, inputs, tout, in_place=False):
    """Runs body(list of numpy arrays) -> list of numpy arrays eagerly, or as a py_function
    (graph_mode.run). in_place: body also takes the eager GPU tensors dlpack_views takes, as
    they are (the allreduces), and may return TensorFlow tensors."""
    def args(xs):
        return [x if in_place and dlpack_views.takes(x) else _host(x) for x in xs]
    if _executing_eagerly():
        return [_to_tf(o) for o in body(args(inputs))]
    return graph_mode.run(lambda xs: body(args(xs)), inputs, tout, HorovodPreconditionError)


def _prepare(tensor):
    if isinstance(tensor, tf.IndexedSlices):
        raise ValueError("tf.IndexedSlices are not supported by this operation.")
    t = tf.convert_to_tensor(tensor)
    _check_dtype(t.dtype)
    if t.shape.rank is not None and t.shape.rank > _lib.MAX_DIMS:
        raise ValueError("Tensors of more than %d dimensions are not supported." % _lib.MAX_DIMS)
    return t
