"""Loads libhvdsparse.so through ctypes and declares every function of hvdsparse.h.

Search order: $HVDSPARSE_LIBRARY; next to the package (an installed copy); the source tree's
build/lib. The binding is never compiled against a framework: this file is the whole ABI.
"""
import ctypes
import os
import threading

# ---- hvdsparse.h constants -------------------------------------------------------------------
SUCCESS, IN_PROGRESS, INVALID_ARGUMENT, INVALID_USAGE, PRECONDITION_ERROR, SYSTEM_ERROR, \
    TIMEOUT, REMOTE_ERROR, SHUT_DOWN, INTERNAL_ERROR, NOT_SUPPORTED = range(11)

UINT8, INT8, UINT16, INT16, INT32, INT64, FLOAT16, FLOAT32, FLOAT64, BOOL, BFLOAT16 = range(11)
MAX_DIMS = 8
SPARSE_COO, SPARSE_ROWS = 0, 1  # hvds_sparse_format_t
SPARSE_ALGORITHMS = ("auto", "dense", "allgather", "ssar_recursive_doubling",
                     "ssar_split_allgather", "dsar_split_allgather", "zen")


class Tensor(ctypes.Structure):
    """hvds_tensor_t: a view of memory the caller owns."""
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("device", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("shape", ctypes.c_int64 * MAX_DIMS)]


class TopKPlan(ctypes.Structure):
    """hvds_topk_plan_t: how hvds_topk_feedback selects k entries (sample 0: exactly)."""
    _fields_ = [("k", ctypes.c_int64), ("sample", ctypes.c_int64),
                ("sample_rank", ctypes.c_int64), ("seed", ctypes.c_uint64)]


class SparseTensor(ctypes.Structure):
    """hvds_sparse_tensor_t: COO (flat element indices, one value each) or ROWS (row ids, one
    row of numel(dense_shape[1:]) values each); indices and values are memory the caller owns."""
    _fields_ = [("format", ctypes.c_int), ("indices", ctypes.c_void_p),
                ("index_dtype", ctypes.c_int), ("values", ctypes.c_void_p),
                ("dtype", ctypes.c_int), ("nnz", ctypes.c_int64), ("dense_ndim", ctypes.c_int32),
                ("dense_shape", ctypes.c_int64 * MAX_DIMS), ("device", ctypes.c_int32)]


# The address handed to the C API for buffers of no bytes: non-NULL, never read or written.
_EMPTY_BUFFER = ctypes.create_string_buffer(8)
EMPTY = ctypes.addressof(_EMPTY_BUFFER)


def tensor_view(data, dtype, shape, device=-1):
    """hvds_tensor_t over memory at address data (0 or None for no bytes: EMPTY) of device (-1
    the host, else a GPU's index); the caller has checked that shape has at most MAX_DIMS
    dimensions."""
    v = Tensor()
    v.data = data or EMPTY
    v.dtype = dtype
    v.device = device
    v.ndim = len(shape)
    for i, d in enumerate(shape):
        v.shape[i] = int(d)
    return v


ALLOC_FN = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int32,
                            ctypes.POINTER(ctypes.c_int64), ctypes.c_size_t)


class OpOptions(ctypes.Structure):
    """hvds_op_options_t; construct with op_options() for the HVDS_OP_OPTIONS_INIT defaults."""
    _fields_ = [("size", ctypes.c_size_t), ("version", ctypes.c_uint32),
                ("name", ctypes.c_char_p), ("process_set", ctypes.c_int32),
                ("op", ctypes.c_int), ("prescale", ctypes.c_double),
                ("postscale", ctypes.c_double), ("root_rank", ctypes.c_int32),
                ("splits", ctypes.POINTER(ctypes.c_int32)), ("nsplits", ctypes.c_int32),
                ("alloc", ALLOC_FN), ("alloc_ctx", ctypes.c_void_p),
                # version 2: the runtime reads these only when size covers them
                ("sparse_algorithm", ctypes.c_char_p), ("sparse_detect", ctypes.c_int32),
                # version 3
                ("sparse_quant_bits", ctypes.c_int32),
                # version 4: the ordered fast lane
                ("ordered", ctypes.c_int32),
                # version 5: a GPU tensor's producer stream (cudaStream_t as an integer)
                ("stream", ctypes.c_int64)]


def op_options(name, process_set=0, op=1, prescale=1.0, postscale=1.0, root_rank=0,
               sparse_algorithm=None, sparse_detect=None):
    """sparse_algorithm: one of SPARSE_ALGORITHMS ("auto": the cost model), or None for
    HVDSPARSE_SPARSE_ALGORITHM's default; used by sparse allreduces and by dense allreduces that
    take the sparse path. sparse_detect: True lets a dense allreduce count its non-zero rows and
    run as a sparse allreduce when the cost model finds it cheaper (same result), False never,
    None HVDSPARSE_SPARSE_DETECT's default."""
    o = OpOptions()
    o.size = ctypes.sizeof(OpOptions)
    o.version = 5
    o.name = name.encode() if isinstance(name, str) else name
    o.process_set = process_set
    o.op = op
    o.prescale = prescale
    o.postscale = postscale
    o.root_rank = root_rank
    if sparse_algorithm is not None:
        o.sparse_algorithm = check_sparse_algorithm(sparse_algorithm).encode()
    o.sparse_detect = -1 if sparse_detect is None else (1 if sparse_detect else 0)
    return o


def set_splits(opts, splits):
    """Points opts at alltoall's splits; returns the C array, which must outlive the operation."""
    array = (ctypes.c_int32 * max(1, len(splits)))(*splits)
    opts.splits = ctypes.cast(array, ctypes.POINTER(ctypes.c_int32))
    opts.nsplits = len(splits)
    return array


def check_sparse_algorithm(algorithm):
    """algorithm, or ValueError naming the valid ones (the same check on every rank, before
    anything is enqueued)."""
    if algorithm not in SPARSE_ALGORITHMS:
        raise ValueError("unknown sparse algorithm %r; expected one of %s"
                         % (algorithm, ", ".join(SPARSE_ALGORITHMS)))
    return algorithm


_c = ctypes
_I, _I32, _I64, _D, _P = _c.c_int, _c.c_int32, _c.c_int64, _c.c_double, _c.c_void_p
_TP = _c.POINTER(Tensor)
_OP = _c.POINTER(OpOptions)
_HP = _c.POINTER(_I64)
_I32P = _c.POINTER(_I32)
_SP = _c.POINTER(SparseTensor)

# name: (restype, argtypes)
_SIGNATURES = {
    "hvds_init": (_I, []),
    "hvds_init_with_process_sets": (_I, [_I32P, _I32P, _I32]),
    "hvds_shutdown": (_I, []),
    "hvds_set_shutdown_reason": (_I, [_c.c_char_p]),
    "hvds_is_initialized": (_I, []),
    "hvds_elastic_hosts_updated": (_I, []),
    "hvds_last_error": (_c.c_char_p, []),
    "hvds_result_str": (_c.c_char_p, [_I]),
    "hvds_rank": (_I, []),
    "hvds_size": (_I, []),
    "hvds_local_rank": (_I, []),
    "hvds_local_size": (_I, []),
    "hvds_cross_rank": (_I, []),
    "hvds_cross_size": (_I, []),
    "hvds_is_homogeneous": (_I, []),
    "hvds_gloo_built": (_I, []),
    "hvds_nccl_built": (_I, []),
    "hvds_cuda_built": (_I, []),
    "hvds_gpu_operations_routed": (_I, []),
    "hvds_device_synchronize": (_I, [_I32]),
    "hvds_mpi_built": (_I, []),
    "hvds_hwloc_built": (_I, []),
    "hvds_allreduce_async": (_I, [_TP, _TP, _OP, _HP]),
    "hvds_grouped_allreduce_async": (_I, [_I32, _TP, _TP, _OP, _HP]),
    "hvds_allgather_async": (_I, [_TP, _OP, _HP]),
    "hvds_broadcast_async": (_I, [_TP, _OP, _HP]),
    "hvds_alltoall_async": (_I, [_TP, _OP, _HP]),
    "hvds_reducescatter_async": (_I, [_TP, _OP, _HP]),
    "hvds_grouped_reducescatter_async": (_I, [_I32, _TP, _OP, _HP]),
    "hvds_barrier_async": (_I, [_I32, _HP]),
    "hvds_join_async": (_I, [_HP]),
    "hvds_poll": (_I, [_I64]),
    "hvds_wait": (_I, [_I64, _I32]),
    "hvds_handle_error": (_c.c_char_p, [_I64]),
    "hvds_handle_output": (_I, [_I64, _I32, _TP]),
    "hvds_handle_take_output": (_P, [_I64, _I32]),
    "hvds_free": (None, [_P]),
    "hvds_handle_splits": (_I32, [_I64, _c.POINTER(_I32P)]),
    "hvds_handle_join_rank": (_I32, [_I64]),
    "hvds_handle_gpu_work": (_I32, [_I64]),
    "hvds_handle_stream_wait": (_I, [_I64, _I64]),
    "hvds_release": (None, [_I64]),
    "hvds_add_process_set": (_I, [_I32P, _I32, _I32P]),
    "hvds_remove_process_set": (_I, [_I32]),
    "hvds_process_set_rank": (_I, [_I32]),
    "hvds_process_set_size": (_I, [_I32]),
    "hvds_process_set_included": (_I, [_I32]),
    "hvds_process_set_ranks": (_I32, [_I32, _I32P]),
    "hvds_number_of_process_sets": (_I32, []),
    "hvds_process_set_ids": (_I32, [_I32P]),
    "hvds_start_timeline": (_I, [_c.c_char_p, _I]),
    "hvds_stop_timeline": (_I, []),
    "hvds_dtype_size": (_c.c_size_t, [_I]),
    "hvds_dtype_name": (_c.c_char_p, [_I]),
    "hvds_sparse_allreduce_async": (_I, [_SP, _TP, _OP, _HP]),
    "hvds_handle_sparse_result": (_I, [_I64, _HP, _c.POINTER(_P), _c.POINTER(_P), _I32P,
                                       _c.POINTER(_c.c_char_p)]),
    "hvds_topk_feedback": (_I, [_P, _P, _I, _I64, _c.POINTER(TopKPlan), _P, _I, _P, _HP,
                                _I32P]),
    "hvds_topk_feedback_device": (_I, [_I32, _I64, _P, _P, _I, _I64, _I64, _P, _I, _P]),
    "hvds_zen_key": (_c.c_uint64, []),
    "hvds_quantized_bytes": (_I64, [_I64, _I32]),
    "hvds_quantize": (_I, [_I32, _I64, _P, _I64, _I, _I32, _c.c_uint64, _P]),
    "hvds_dequantize": (_I, [_I32, _I64, _P, _I64, _I32, _I, _P]),
}
# Bound when the library has them; has(name) says which (a library built before them loads).
_OPTIONAL = {"hvds_sparse_allreduce_async", "hvds_handle_sparse_result", "hvds_topk_feedback",
             "hvds_topk_feedback_device", "hvds_zen_key", "hvds_quantized_bytes",
             "hvds_quantize", "hvds_dequantize",
             "hvds_set_shutdown_reason", "hvds_elastic_hosts_updated"}

_LIBNAME = "libhvdsparse.so"
_lock = threading.Lock()
_lib = None


def candidates():
    """Paths tried, in order."""
    here = os.path.dirname(os.path.abspath(__file__))
    package = os.path.dirname(here)  # .../hvdsparse
    out = []
    env = os.environ.get("HVDSPARSE_LIBRARY")
    if env:
        out.append(env)
    out.append(os.path.join(package, _LIBNAME))
    out.append(os.path.join(package, "lib", _LIBNAME))
    # frameworks/common/hvdsparse/common/_lib.py -> the repository root is four levels up.
    root = os.path.dirname(os.path.dirname(os.path.dirname(package)))
    out.append(os.path.join(root, "build", "lib", _LIBNAME))
    return out


def lib():
    """The loaded library (loaded once); raises ImportError naming every path tried."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for path in candidates():
            if not os.path.exists(path):
                tried.append(path + " (missing)")
                continue
            try:
                handle = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            except OSError as e:
                tried.append("%s (%s)" % (path, e))
                continue
            for name, (restype, argtypes) in _SIGNATURES.items():
                if name in _OPTIONAL and not hasattr(handle, name):
                    continue
                fn = getattr(handle, name)
                fn.restype = restype
                fn.argtypes = argtypes
            _lib = handle
            return _lib
        raise ImportError("hvdsparse: cannot load %s; set HVDSPARSE_LIBRARY or build the C "
                          "library. Tried: %s" % (_LIBNAME, "; ".join(tried)))


def has(name):
    """True when the loaded library exports the C function name."""
    return hasattr(lib(), name)


def require(name, what):
    """The C function name, or NotImplementedError when this library was built without it."""
    if not has(name):
        raise NotImplementedError("hvdsparse: %s needs %s, which this libhvdsparse.so does not "
                                  "export; rebuild the library" % (what, name))
    return getattr(lib(), name)


def last_error():
    msg = lib().hvds_last_error()
    return msg.decode(errors="replace") if msg else ""


def handle_error(h):
    msg = lib().hvds_handle_error(h)
    return msg.decode(errors="replace") if msg else ""


def result_str(rc):
    s = lib().hvds_result_str(rc)
    return s.decode() if s else str(rc)
