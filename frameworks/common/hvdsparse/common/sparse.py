"""What the bindings share for hvds_sparse_allreduce_async: the wire index type, the
hvds_sparse_tensor_t for a pair of index and value buffers, and reading a finished handle's
sparse result. Framework-neutral: buffers are addresses and element counts."""
import ctypes
import os

from hvdsparse.common import _lib, basics

INT32_LIMIT = 2 ** 31 - 1  # indices below it travel as int32


def wire_index_dtype(dim):
    """HVDS_INT32 when every valid index in [0, dim) and the first invalid one (dim) fit in an
    int32, else HVDS_INT64. Depends only on the dense shape, so every rank picks the same."""
    return _lib.INT32 if dim <= INT32_LIMIT else _lib.INT64


def requested_algorithm(algorithm):
    """The sparse algorithm a call asks for: its own, else the SPARSE_ALGORITHM knob as the
    runtime reads it (HVDSPARSE_, then HOROVOD_), else auto."""
    return (algorithm or os.environ.get("HVDSPARSE_SPARSE_ALGORITHM")
            or os.environ.get("HOROVOD_SPARSE_ALGORITHM") or "auto")


def index_bytes(index_dtype):
    return 4 if index_dtype == _lib.INT32 else 8


def tensor(fmt, indices_ptr, index_dtype, values_ptr, dtype, nnz, dense_shape):
    """hvds_sparse_tensor_t over CPU buffers the caller keeps alive until the wait."""
    if len(dense_shape) > _lib.MAX_DIMS:
        raise ValueError("Sparse tensors of more than %d dimensions are not supported."
                         % _lib.MAX_DIMS)
    st = _lib.SparseTensor()
    st.format = fmt
    st.indices = indices_ptr or _lib.EMPTY
    st.index_dtype = index_dtype
    st.values = values_ptr or _lib.EMPTY
    st.dtype = dtype
    st.nnz = nnz
    st.dense_ndim = len(dense_shape)
    for i, d in enumerate(dense_shape):
        st.dense_shape[i] = int(d)
    st.device = -1
    return st


def enqueue_fn():
    """hvds_sparse_allreduce_async, or NotImplementedError for a library built without it."""
    return _lib.require("hvds_sparse_allreduce_async", "sparse allreduce")


class Result:
    """A finished sparse allreduce (no dense output): nnz entries at indices and values, or, when
    is_dense, the whole dense tensor at values (indices NULL). The memory is the alloc
    callback's, or the runtime's until hvds_release()."""
    __slots__ = ("nnz", "indices", "values", "is_dense", "algorithm")


def result(handle):
    """Reads hvds_handle_sparse_result() after a successful wait."""
    fn = _lib.require("hvds_handle_sparse_result", "sparse allreduce")
    nnz, ind, val = ctypes.c_int64(0), ctypes.c_void_p(), ctypes.c_void_p()
    dense, alg = ctypes.c_int32(0), ctypes.c_char_p()
    basics.check(fn(handle, ctypes.byref(nnz), ctypes.byref(ind), ctypes.byref(val),
                    ctypes.byref(dense), ctypes.byref(alg)), "sparse result")
    r = Result()
    r.nnz, r.indices, r.values = nnz.value, ind.value, val.value
    r.is_dense = bool(dense.value)
    r.algorithm = alg.value.decode() if alg.value else None
    return r
