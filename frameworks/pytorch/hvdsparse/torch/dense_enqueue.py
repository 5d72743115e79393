"""The enqueue steps that mpi_ops' collectives and gpu_sparse's sparse allreduces of CUDA
tensors share: an allreduce into a given output, and an operation whose output the runtime
sizes (allgather, alltoall)."""
import ctypes

import torch

from hvdsparse.common import _lib, handles
from hvdsparse.common.basics import require_init
from hvdsparse.torch.handles import (_check_tensor, _enqueue_allocating, _options, _register,
                                     _view)


def _contiguous_pair(tensor, output):
    """(input buffer, output buffer, copy-back) for an allreduce into output."""
    src = tensor if tensor.is_contiguous() else tensor.contiguous()
    if output is tensor:
        return src, src, (None if src is tensor else tensor)
    dst = output
    if not output.is_contiguous():
        dst = torch.empty_like(output, memory_format=torch.contiguous_format)
    return src, dst, (None if dst is output else output)


def _allreduce_async(tensor, output, name, op, prescale_factor, postscale_factor, process_set,
                     sparse_detect=None, sparse_algorithm=None):
    """sparse_detect: the runtime counts the tensor's non-zero rows and takes the sparse path
    when cheaper (the result is the same); sparse_algorithm forces that path's algorithm."""
    require_init()
    _check_tensor(tensor)
    src, dst, copy_back = _contiguous_pair(tensor, output)
    opts = _options("allreduce", name, process_set, op, prescale_factor, postscale_factor,
                    sparse_algorithm=sparse_algorithm, sparse_detect=sparse_detect, like=src)
    vin, vout = _view(src), _view(dst)
    h = handles.enqueue(_lib.lib().hvds_allreduce_async, ctypes.byref(vin), ctypes.byref(vout),
                        ctypes.byref(opts))

    def finish(_h):
        if copy_back is not None:
            copy_back.copy_(dst)
            return copy_back
        return dst
    return _register(h, (tensor, output, src, dst), finish)


def _gather_like(kind, c_fn, tensor, name, process_set, splits=None, ordered=False):
    """Shared enqueue for ops with one runtime-shaped output (allgather, alltoall)."""
    require_init()
    _check_tensor(tensor)
    src = tensor.contiguous()
    opts = _options(kind, name, process_set, like=src)
    opts.ordered = 1 if ordered else 0
    keep = [tensor, src, opts]
    if splits is not None:
        keep.append(_lib.set_splits(opts, splits))
    v = _view(src)
    h, key = _enqueue_allocating(opts, c_fn, ctypes.byref(v), ctypes.byref(opts))
    return h, key, keep
