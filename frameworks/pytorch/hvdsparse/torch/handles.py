"""The machinery under the torch collectives: dtype mapping, tensor views for the C API, the
handle map that keeps each operation's tensors alive until synchronize(), the allocation callback
that makes torch tensors for outputs of negotiated size, and synchronize (enqueueing and waiting
are hvdsparse.common.handles', shared with the TensorFlow binding)."""
import ctypes
import itertools
import threading

import torch

from hvdsparse.common import _lib, basics, handles, util
from hvdsparse.common.ops import Sum
from hvdsparse.common.process_sets import set_id

# ---- dtypes ----------------------------------------------------------------------------------
_TO_C = {torch.uint8: _lib.UINT8, torch.int8: _lib.INT8, torch.int16: _lib.INT16,
         torch.int32: _lib.INT32, torch.int64: _lib.INT64, torch.float16: _lib.FLOAT16,
         torch.float32: _lib.FLOAT32, torch.float64: _lib.FLOAT64, torch.bool: _lib.BOOL,
         torch.bfloat16: _lib.BFLOAT16}
if hasattr(torch, "uint16"):
    _TO_C[torch.uint16] = _lib.UINT16
_FROM_C = {v: k for k, v in _TO_C.items()}


_device_library = []  # [whether the runtime loaded its device library], asked once


def _check_device(tensor):
    """CPU and CUDA tensors; CUDA ones need the device library, which stages them through host
    memory (HVDSPARSE_GPU_OPERATIONS, docs/gpu.md)."""
    if tensor.device.type == "cpu":
        return
    if tensor.device.type != "cuda":
        raise NotImplementedError("hvdsparse: tensor on %s: only CPU and CUDA tensors are "
                                  "supported." % tensor.device)
    if not _device_library:
        _device_library.append(basics.cuda_built())
    if not _device_library[0]:
        raise NotImplementedError(
            "hvdsparse: tensor on %s: this installation has no device library "
            "(libhvdsparse_device.so; `hvdsparse check-build` says why), which GPU tensors "
            "need. Move the tensor to the CPU." % tensor.device)


def _check_tensor(tensor):
    if not isinstance(tensor, torch.Tensor):
        raise ValueError("Expected a torch.Tensor, got %s." % type(tensor).__name__)
    _check_device(tensor)
    if tensor.dtype not in _TO_C:
        raise ValueError("Tensor type %s is not supported." % tensor.type())
    if tensor.is_sparse:
        raise ValueError("Sparse tensors are not supported here; use sparse_allreduce_async.")
    if tensor.dim() > _lib.MAX_DIMS:
        raise ValueError("Tensors of more than %d dimensions are not supported." % _lib.MAX_DIMS)


def _view(tensor):
    """hvds_tensor_t over a contiguous CPU or CUDA tensor."""
    device = tensor.device.index if tensor.is_cuda else -1
    return _lib.tensor_view(tensor.data_ptr(), _TO_C[tensor.dtype], tensor.shape, device)


def _options(kind, name, process_set, op=Sum, prescale=1.0, postscale=1.0, root_rank=0,
             sparse_algorithm=None, sparse_detect=None, like=None):
    """hvds_op_options_t for one operation, named as Horovod names it. like: a tensor of the
    operation; a CUDA one gives its current stream (the runtime reads the input after the work
    queued there and orders the result on it) and the device of outputs the runtime sizes."""
    ps = set_id(process_set)
    o = _lib.op_options(util.op_name(kind, name, ps), ps, op, prescale, postscale, root_rank,
                        sparse_algorithm, sparse_detect)
    if like is not None and like.is_cuda:
        o.stream = torch.cuda.current_stream(like.device).cuda_stream
        o.output_device = like.device  # read by _new_alloc
    return o


# ---- handles ---------------------------------------------------------------------------------
class _Pending:
    """One operation in flight: what keeps its memory alive and how to build its result."""
    __slots__ = ("keep", "finish", "alloc_key")

    def __init__(self, keep, finish, alloc_key=None):
        self.keep = keep
        self.finish = finish
        self.alloc_key = alloc_key


_handle_map = {}
_map_lock = threading.Lock()

# Outputs created by the allocation callback: alloc key -> {data_ptr: tensor}, and the device
# they are made on (absent: the CPU).
_alloc_store = {}
_alloc_device = {}
_alloc_keys = itertools.count(1)


def _alloc_cb(ctx, dtype, ndim, shape, nbytes):
    try:
        dims = [shape[i] for i in range(ndim)]
        t = torch.empty(dims, dtype=_FROM_C[dtype], device=_alloc_device.get(ctx, "cpu"))
        if nbytes == 0 or t.numel() == 0:
            return _lib.EMPTY
        store = _alloc_store.get(ctx)
        if store is None:
            return None
        ptr = t.data_ptr()
        store[ptr] = t
        return ptr
    except Exception:  # a Python exception must not cross into C: fail the operation instead
        return None


_ALLOC = _lib.ALLOC_FN(_alloc_cb)


def _new_alloc(opts):
    key = next(_alloc_keys)
    _alloc_store[key] = {}
    device = getattr(opts, "output_device", None)
    if device is not None:
        _alloc_device[key] = device
    opts.alloc = _ALLOC
    opts.alloc_ctx = key
    return key


def _output(handle, i, alloc_key):
    """Output i of a finished handle as a torch tensor (the callback's, else a copy)."""
    t = handles.output(handle, i)
    dims = [t.shape[d] for d in range(t.ndim)]
    dtype = _FROM_C[t.dtype]
    store = _alloc_store.get(alloc_key, {})
    if t.data in store:
        return store.pop(t.data)
    if t.device >= 0:  # an empty result on the GPU: the callback made nothing
        return torch.empty(dims, dtype=dtype, device="cuda:%d" % t.device)
    out = torch.empty(dims, dtype=dtype)
    nbytes = out.numel() * out.element_size()
    if nbytes and t.data and t.data != _lib.EMPTY:
        ctypes.memmove(out.data_ptr(), t.data, nbytes)
    return out


def _register(handle, keep, finish, alloc_key=None):
    with _map_lock:
        _handle_map[handle] = _Pending(keep, finish, alloc_key)
    return handle


def _enqueue_allocating(opts, fn, *args):
    """handles.enqueue(fn, *args) for an operation whose outputs the allocation callback makes
    (opts gets it); returns (handle, the key of its outputs)."""
    key = _new_alloc(opts)
    try:
        return handles.enqueue(fn, *args), key
    except BaseException:
        _alloc_store.pop(key, None)
        _alloc_device.pop(key, None)
        raise


def _reset(event):
    with _map_lock:
        _handle_map.clear()
    _alloc_store.clear()
    _alloc_device.clear()
    util.reset_counters()


basics.register_reset_hook(_reset)


def _poll_one(handle):
    if handle not in _handle_map:
        return True
    return _lib.lib().hvds_poll(handle) != 0


def _order_on_current_stream(handle):
    """HOROVOD_ENABLE_ASYNC_COMPLETION: a handle done at launch still has GPU work in flight;
    the caller's current stream waits for it there, the host does not."""
    lib = _lib.lib()
    device = lib.hvds_handle_gpu_work(handle)
    if device >= 0:
        stream = torch.cuda.current_stream(device).cuda_stream
        basics.check(lib.hvds_handle_stream_wait(handle, stream), "synchronize")


def _synchronize_one(handle):
    with _map_lock:
        pending = _handle_map.pop(handle, None)
    if pending is None:
        return None
    try:
        handles.wait_or_raise(handle)
        _order_on_current_stream(handle)
        return pending.finish(handle)
    finally:
        _lib.lib().hvds_release(handle)
        if pending.alloc_key is not None:
            _alloc_store.pop(pending.alloc_key, None)
            _alloc_device.pop(pending.alloc_key, None)
