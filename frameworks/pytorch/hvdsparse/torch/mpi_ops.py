"""Collectives on torch tensors over libhvdsparse (ctypes), with Horovod's torch API.

Handles are the runtime's integer handles; handles.py keeps each operation's tensors alive until
synchronize(). CPU tensors go to the runtime zero-copy through data_ptr(); outputs whose shape is
known only after negotiation (allgather, alltoall, reducescatter) are torch tensors created by an
allocation callback that the runtime calls on its coordinator thread.
"""
import ctypes
import operator

import torch

from hvdsparse.common import _lib, handles, util
from hvdsparse.common import basics as _basics  # noqa: F401  Horovod's tests use mpi_ops._basics
from hvdsparse.common.basics import (init, shutdown, is_initialized, start_timeline,  # noqa: F401
                                     stop_timeline, size, local_size, cross_size, rank,
                                     local_rank, cross_rank, is_homogeneous,
                                     mpi_threads_supported, mpi_enabled, mpi_built, gloo_enabled,
                                     gloo_built, nccl_built, ddl_built, ccl_built, cuda_built,
                                     rocm_built, require_init)
from hvdsparse.common.gradients import reducescatter_grad
from hvdsparse.common.ops import (Average, Sum, Adasum, Min, Max, Product,  # noqa: F401
                                  check_op, resolve_op)
from hvdsparse.common.process_sets import (ProcessSet, global_process_set,  # noqa: F401
                                           add_process_set, remove_process_set, root_index,
                                           set_id)
from hvdsparse.common.splits import check_splits

from hvdsparse.torch.chained import ChainedHandle
from hvdsparse.torch.dense_enqueue import (_allreduce_async, _contiguous_pair,  # noqa: F401
                                           _gather_like)
from hvdsparse.torch.handles import (_check_tensor, _enqueue_allocating, _options, _output,
                                     _poll_one, _register, _synchronize_one, _view)
from hvdsparse.torch.sparse_ops import (SparseHandle, sparse_allreduce,  # noqa: F401
                                        sparse_allreduce_async)


# ---- allreduce -------------------------------------------------------------------------------
def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set):
    """Starts an out-of-place allreduce; returns a handle for poll() and synchronize()."""
    op = resolve_op(average, op)
    output = torch.empty_like(tensor, memory_format=torch.contiguous_format)
    return _allreduce_async(tensor, output, name, op, prescale_factor, postscale_factor,
                            process_set)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    """Starts an in-place allreduce; returns a handle."""
    op = resolve_op(average, op)
    return _allreduce_async(tensor, tensor, name, op, prescale_factor, postscale_factor,
                            process_set)


class HorovodAllreduce(torch.autograd.Function):
    """Allreduce whose gradient is the allreduce of the gradient with the same op and scales."""

    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor, process_set):
        ctx.op, ctx.prescale, ctx.postscale, ctx.process_set = (op, prescale_factor,
                                                                postscale_factor, process_set)
        return synchronize(allreduce_async(tensor, name=name, op=op,
                                           prescale_factor=prescale_factor,
                                           postscale_factor=postscale_factor,
                                           process_set=process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output, op=ctx.op, prescale_factor=ctx.prescale,
                         postscale_factor=ctx.postscale, process_set=ctx.process_set)
        return grad, None, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=None, op=None, prescale_factor=1.0,
              postscale_factor=1.0, process_set=global_process_set):
    """Allreduce (differentiable), out of place. op defaults to Average.

    compression: Compression.none, fp16 or bf16 (applied on the wire, undone on the result)."""
    _check_tensor(tensor)  # a clear ValueError, not a TypeError from torch.empty_like
    from hvdsparse.torch.compression import Compression
    compression = compression or Compression.none
    op = resolve_op(average, op)
    compressed, cctx = compression.compress(tensor)
    summed = HorovodAllreduce.apply(compressed, name, op, prescale_factor, postscale_factor,
                                    process_set)
    return compression.decompress(summed, cctx)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    """In-place allreduce; returns tensor."""
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                        postscale_factor, process_set))


# ---- grouped allreduce -----------------------------------------------------------------------
def _grouped_allreduce_async(tensors, outputs, name, op, prescale_factor, postscale_factor,
                             process_set, sparse_detect=None, sparse_algorithm=None):
    require_init()
    tensors = list(tensors)
    if not tensors:
        raise ValueError("grouped_allreduce needs at least one tensor.")
    if len({t.device for t in tensors}) > 1:
        raise ValueError("Tensors in list must be on same device.")
    pairs = []
    for t, o in zip(tensors, outputs):
        _check_tensor(t)
        pairs.append(_contiguous_pair(t, o))
    n = len(pairs)
    vin = (_lib.Tensor * n)(*[_view(p[0]) for p in pairs])
    vout = (_lib.Tensor * n)(*[_view(p[1]) for p in pairs])
    opts = _options("grouped_allreduce", name, process_set, op, prescale_factor,
                    postscale_factor, sparse_algorithm=sparse_algorithm,
                    sparse_detect=sparse_detect, like=tensors[0])
    h = handles.enqueue(_lib.lib().hvds_grouped_allreduce_async, n, vin, vout,
                        ctypes.byref(opts))

    def finish(_h):
        result = []
        for _src, dst, copy_back in pairs:
            if copy_back is not None:
                copy_back.copy_(dst)
                result.append(copy_back)
            else:
                result.append(dst)
        return result
    return _register(h, (tensors, outputs, pairs), finish)


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    op = resolve_op(average, op)
    outputs = [torch.empty_like(t, memory_format=torch.contiguous_format) for t in tensors]
    return _grouped_allreduce_async(tensors, outputs, name, op, prescale_factor,
                                    postscale_factor, process_set)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    op = resolve_op(average, op)
    tensors = list(tensors)
    return _grouped_allreduce_async(tensors, tensors, name, op, prescale_factor,
                                    postscale_factor, process_set)


class HorovodGroupedAllreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, prescale_factor, postscale_factor, process_set, *tensors):
        ctx.op, ctx.prescale, ctx.postscale, ctx.process_set = (op, prescale_factor,
                                                                postscale_factor, process_set)
        return tuple(synchronize(grouped_allreduce_async(
            tensors, name=name, op=op, prescale_factor=prescale_factor,
            postscale_factor=postscale_factor, process_set=process_set)))

    @staticmethod
    def backward(ctx, *grad_outputs):
        grads = grouped_allreduce(list(grad_outputs), op=ctx.op, prescale_factor=ctx.prescale,
                                  postscale_factor=ctx.postscale, process_set=ctx.process_set)
        return (None, None, None, None, None) + tuple(grads)


def grouped_allreduce(tensors, average=None, name=None, compression=None, op=None,
                      prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set):
    """Allreduce of a list of tensors negotiated as one group (differentiable)."""
    from hvdsparse.torch.compression import Compression
    compression = compression or Compression.none
    op = resolve_op(average, op)
    compressed, ctxs = zip(*[compression.compress(t) for t in tensors]) if tensors else ((), ())
    summed = HorovodGroupedAllreduce.apply(name, op, prescale_factor, postscale_factor,
                                           process_set, *compressed)
    return [compression.decompress(t, c) for t, c in zip(summed, ctxs)]


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set):
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                                postscale_factor, process_set))


# ---- allgather -------------------------------------------------------------------------------
def allgather_async(tensor, name=None, process_set=global_process_set, ordered=False):
    """Starts an allgather along dimension 0 (sizes may differ per rank); returns a handle.
    ordered=True: the runtime's ordered fast lane (no per-tensor negotiation), for a schedule
    every rank submits in the same order with the same shapes (see reducescatter_async)."""
    h, key, keep = _gather_like("allgather", _lib.lib().hvds_allgather_async, tensor, name,
                                process_set, ordered=ordered)
    return _register(h, keep, lambda hh: _output(hh, 0, key), key)


class HorovodAllgather(torch.autograd.Function):
    """Allgather; the gradient is this rank's slice of the averaged gradient."""

    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.dim = tensor.shape[0] if tensor.dim() else 1
        ctx.process_set = process_set
        return synchronize(allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output, op=Average, process_set=ctx.process_set)
        dims = allgather(torch.tensor([ctx.dim], dtype=torch.int32), process_set=ctx.process_set)
        offset = int(dims[:ctx.process_set.rank()].sum().item())
        return grad.narrow(0, offset, ctx.dim), None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenates every rank's tensor along dimension 0 (differentiable)."""
    _check_tensor(tensor)  # a clear ValueError, not an AttributeError from inside autograd
    return HorovodAllgather.apply(tensor, name, process_set)


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    """Allgather of several tensors; one handle whose result is a list.

    The runtime's C API has no grouped allgather, so this issues one allgather per tensor
    (named "<name>_<i>of<n>") and completes them together."""
    tensors = list(tensors)
    base = util.op_name("grouped_allgather", name, set_id(process_set))
    n = len(tensors)
    return _Group([allgather_async(t, name="%s_%dof%d" % (base, i + 1, n),
                                   process_set=process_set) for i, t in enumerate(tensors)])


class _Group:
    """A handle over several handles (grouped allgather)."""

    def __init__(self, parts, combine=None):
        self.handles = parts
        self.combine = combine


def _sync_group(group):
    results = handles.finish_all(group.handles, _synchronize_one)
    return group.combine(results) if group.combine else results


class HorovodGroupedAllgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.dims = [t.shape[0] for t in tensors]
        ctx.process_set = process_set
        return tuple(synchronize(grouped_allgather_async(tensors, name, process_set)))

    @staticmethod
    def backward(ctx, *grad_outputs):
        grads = grouped_allreduce(list(grad_outputs), op=Average, process_set=ctx.process_set)
        dims = allgather(torch.tensor([ctx.dims], dtype=torch.int64),
                         process_set=ctx.process_set)
        r = ctx.process_set.rank()
        out = []
        for i, g in enumerate(grads):
            offset = int(dims[:r, i].sum().item())
            out.append(g.narrow(0, offset, ctx.dims[i]))
        return (None, None) + tuple(out)


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    return list(HorovodGroupedAllgather.apply(name, process_set, *tensors))


# ---- broadcast -------------------------------------------------------------------------------
def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts an in-place broadcast from root_rank (a global rank); returns a handle."""
    require_init()
    _check_tensor(tensor)
    buf = tensor if tensor.is_contiguous() else tensor.contiguous()
    opts = _options("broadcast", name, process_set,
                    root_rank=root_index(root_rank, process_set), like=buf)
    v = _view(buf)
    h = handles.enqueue(_lib.lib().hvds_broadcast_async, ctypes.byref(v), ctypes.byref(opts))

    def finish(_h):
        if buf is not tensor:
            tensor.copy_(buf)
        return tensor
    return _register(h, (tensor, buf), finish)


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts an out-of-place broadcast; synchronize() returns a new tensor."""
    output = tensor.detach().clone(memory_format=torch.contiguous_format)
    return broadcast_async_(output, root_rank, name, process_set)


class HorovodBroadcast(torch.autograd.Function):
    """Broadcast; the gradient is the gradient averaged over the set on the root and zero
    elsewhere (Horovod's definition)."""

    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank, ctx.process_set = root_rank, process_set
        return synchronize(broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output, op=Average, process_set=ctx.process_set)
        if rank() != ctx.root_rank:
            grad = grad * 0
        return grad, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """Returns root_rank's tensor on every rank (differentiable); the input is not modified."""
    _check_tensor(tensor)  # a clear ValueError, not an AttributeError from inside autograd
    return HorovodBroadcast.apply(tensor, root_rank, name, process_set)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """In-place broadcast; returns tensor."""
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


# ---- alltoall --------------------------------------------------------------------------------
def _check_splits(tensor, splits, process_set):
    if tensor.dim() == 0:
        raise ValueError("alltoall needs a tensor of at least one dimension.")
    if isinstance(splits, torch.Tensor):
        if splits.dtype not in (torch.int32, torch.int64):
            raise ValueError("splits must be a tensor of type int32 (or int64), not %s"
                             % splits.dtype)
        splits = splits.cpu().tolist()
    return check_splits(splits, tensor.shape[0], process_set.size())


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """Starts an alltoall: splits[i] rows go to rank i of the set (equal parts when None).
    synchronize() returns (output, received_splits)."""
    require_init()
    _check_tensor(tensor)
    s = _check_splits(tensor, splits, process_set)
    h, key, keep = _gather_like("alltoall", _lib.lib().hvds_alltoall_async, tensor, name,
                                process_set, s)

    def finish(hh):
        received = torch.tensor(handles.received_splits(hh), dtype=torch.int32)
        return _output(hh, 0, key), received
    return _register(h, keep, finish, key)


class HorovodAlltoall(torch.autograd.Function):
    """Alltoall; the gradient travels back with the received splits."""

    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        ctx.process_set = process_set
        out, received = synchronize(alltoall_async(tensor, splits, name, process_set))
        ctx.received = received
        ctx.mark_non_differentiable(received)
        return out, received

    @staticmethod
    def backward(ctx, grad_output, grad_received):
        grad, _ = alltoall(grad_output, splits=ctx.received, process_set=ctx.process_set)
        return grad, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Scatters slices of tensor to every rank and gathers theirs (differentiable).

    Returns output, or (output, received_splits) when splits is given."""
    out, received = HorovodAlltoall.apply(tensor, splits, name, process_set)
    return out if splits is None else (out, received)


# ---- reducescatter ---------------------------------------------------------------------------
def _check_reducescatter(tensor, op):
    if tensor.dim() == 0:
        raise ValueError("Reducescatter does not support scalar (rank-zero) tensors.")
    if op not in (Sum, Average, Min, Max, Product):
        check_op(op)


def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set,
                        prescale_factor=1.0, postscale_factor=1.0, ordered=False):
    """Starts a reduce-scatter along dimension 0: rank i keeps rows
    [i * n / size, ...) (the first dim0 % size ranks get one extra row).
    ordered=True puts it in the runtime's ordered fast lane: no per-tensor negotiation, run in
    submission order ahead of negotiated work. Every rank must then submit its ordered
    operations in the same order with the same names, dtypes and shapes; a mismatch raises on
    every rank (HorovodInternalError naming this rank's operation)."""
    require_init()
    _check_tensor(tensor)
    op = check_op(op)
    _check_reducescatter(tensor, op)
    src = tensor.contiguous()
    opts = _options("reducescatter", name, process_set, op,
                    prescale_factor, postscale_factor, like=src)
    opts.ordered = 1 if ordered else 0
    v = _view(src)
    h, key = _enqueue_allocating(opts, _lib.lib().hvds_reducescatter_async, ctypes.byref(v),
                                 ctypes.byref(opts))
    return _register(h, (tensor, src, opts), lambda hh: _output(hh, 0, key), key)


def _reducescatter_grad(grad, op, prescale, postscale, process_set):
    return reducescatter_grad(grad, op, prescale, postscale, process_set,
                              lambda g, ps: allgather(g, process_set=ps), operator.mul)


class HorovodReducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale_factor, postscale_factor):
        ctx.op, ctx.process_set = op, process_set
        ctx.prescale, ctx.postscale = prescale_factor, postscale_factor
        return synchronize(reducescatter_async(tensor, name, op, process_set, prescale_factor,
                                               postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        grad = _reducescatter_grad(grad_output, ctx.op, ctx.prescale, ctx.postscale,
                                   ctx.process_set)
        return grad, None, None, None, None, None


def reducescatter(tensor, name=None, compression=None, op=Average,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """Reduces across ranks and scatters along dimension 0 (differentiable)."""
    from hvdsparse.torch.compression import Compression
    compression = compression or Compression.none
    compressed, cctx = compression.compress(tensor)
    out = HorovodReducescatter.apply(compressed, name, op, process_set, prescale_factor,
                                     postscale_factor)
    return compression.decompress(out, cctx)


def grouped_reducescatter_async(tensors, name=None, op=Average, process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    require_init()
    tensors = list(tensors)
    if not tensors:
        raise ValueError("grouped_reducescatter needs at least one tensor.")
    if len({t.device for t in tensors}) > 1:
        raise ValueError("Tensors in list must be on same device.")
    op = check_op(op)
    srcs = []
    for t in tensors:
        _check_tensor(t)
        _check_reducescatter(t, op)
        srcs.append(t.contiguous())
    n = len(srcs)
    vin = (_lib.Tensor * n)(*[_view(s) for s in srcs])
    opts = _options("grouped_reducescatter", name, process_set, op,
                    prescale_factor, postscale_factor, like=srcs[0])
    h, key = _enqueue_allocating(opts, _lib.lib().hvds_grouped_reducescatter_async, n, vin,
                                 ctypes.byref(opts))
    return _register(h, (tensors, srcs, opts),
                     lambda hh: [_output(hh, i, key) for i in range(n)], key)


class HorovodGroupedReducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, process_set, prescale_factor, postscale_factor, *tensors):
        ctx.op, ctx.process_set = op, process_set
        ctx.prescale, ctx.postscale = prescale_factor, postscale_factor
        return tuple(synchronize(grouped_reducescatter_async(
            tensors, name, op, process_set, prescale_factor, postscale_factor)))

    @staticmethod
    def backward(ctx, *grad_outputs):
        grads = [_reducescatter_grad(g, ctx.op, ctx.prescale, ctx.postscale, ctx.process_set)
                 for g in grad_outputs]
        return (None, None, None, None, None) + tuple(grads)


def grouped_reducescatter(tensors, name=None, compression=None, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    from hvdsparse.torch.compression import Compression
    compression = compression or Compression.none
    compressed, ctxs = zip(*[compression.compress(t) for t in tensors]) if tensors else ((), ())
    outs = HorovodGroupedReducescatter.apply(name, op, process_set, prescale_factor,
                                             postscale_factor, *compressed)
    return [compression.decompress(t, c) for t, c in zip(outs, ctxs)]


# ---- join, barrier ---------------------------------------------------------------------------
def join(device=-1):
    """This rank has no more batches: contributes zeros to the others' allreduces until every
    rank joined. Returns the last rank that joined (the same on every rank).

    device: where Horovod makes those zeros (-1: CPU). The runtime makes them in host memory,
    where GPU tensors are staged too (docs/gpu.md), so a device id changes nothing."""
    require_init()
    if not (device is None or device == "cpu" or isinstance(device, (int, torch.device))):
        raise ValueError("join(device=%r): device is a device id (int)" % (device,))
    return handles.join()


def barrier(process_set=global_process_set):
    """Blocks until every rank of the set reached the barrier."""
    handles.barrier(set_id(process_set))


def synchronize(handle):
    """Waits for the operation behind handle and returns its output.

    Raises HorovodInternalError (a RuntimeError) when the operation failed: ranks disagreed, a
    peer died, or the runtime shut down."""
    if isinstance(handle, _Group):
        return _sync_group(handle)
    if isinstance(handle, (SparseHandle, ChainedHandle)):
        return handle()
    return _synchronize_one(handle)


def poll(handle):
    """True when the operation is done (synchronize() will not block)."""
    if isinstance(handle, _Group):
        return all(_poll_one(h) for h in handle.handles)
    if isinstance(handle, (SparseHandle, ChainedHandle)):
        return handle.poll()
    return _poll_one(handle)
