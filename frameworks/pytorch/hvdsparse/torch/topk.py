"""Compression.topk for PyTorch: selection, error feedback, the sparse allreduce into p.grad, and
the residuals as optimizer state (hvdsparse/common/topk.py has the scheme, docs/compression.md
the user's view).

DistributedOptimizer(opt, compression=hvd.Compression.topk(0.01)) keeps one residual per
compressed parameter. In the gradient hook: acc = residual + p.grad, the top k of acc travel as a
COO sparse tensor over a flat view (hvds_sparse_allreduce_async, dense output = p.grad), the
residual becomes acc minus what was sent, and step() sees the averaged dense gradient in p.grad.

The residuals are optimizer state, outside optimizer.state (an optimizer such as Adam
initialises its state when a parameter's state is empty, so they must not sit there):
state_dict() adds them under "hvdsparse" -> "topk_residual" -> {parameter index: tensor},
load_state_dict() restores them (missing: zeros), and hvd.broadcast_optimizer_state() sends
root_rank's residuals to every rank with the rest of the state.
"""
import ctypes

import torch

from hvdsparse.common import _lib, basics, handles
from hvdsparse.common import sparse as csparse
from hvdsparse.common.basics import require_init
from hvdsparse.common.topk import TopKCompressorBase, quant_bits_supported  # noqa: F401
from hvdsparse.torch.gpu_sparse import dense_allgather, recursive_doubling, split
from hvdsparse.torch.handles import _TO_C, _check_device, _options, _register, _view

STATE_KEY = "hvdsparse"
RESIDUAL_KEY = "topk_residual"
NATIVE_DTYPES = (torch.float32, torch.float64)  # what hvds_topk_feedback selects from


class TopKCompressor(TopKCompressorBase):
    """Compression.topk(ratio, ...) for torch tensors (options: TopKCompressorBase)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._gen = torch.Generator().manual_seed(self.seed)
        self._scratch = {}  # (dtype, device) -> buffer for |acc|, the largest tensor's size

    @staticmethod
    def _native_ok(acc, grad=None):
        """True when C selects: float32/float64, contiguous, grad of acc's dtype and device; on
        the CPU by hvds_topk_feedback, on a GPU by the cuda/ kernel (hvds_topk_feedback_device,
        with the device library)."""
        if acc.dtype not in NATIVE_DTYPES or not acc.is_contiguous():
            return False
        if grad is not None and (grad.dtype != acc.dtype or grad.device != acc.device):
            return False
        if acc.is_cuda:
            return _lib.has("hvds_topk_feedback_device") and basics.cuda_built()
        return acc.device.type == "cpu" and _lib.has("hvds_topk_feedback")

    def _native(self, acc, grad):
        """(values, indices) of the top k of acc + grad (grad may be None) selected in C, with
        acc = acc + grad - sent in place; indices in increasing order, int32 when the tensor's
        indices fit (what the sparse allreduce sends). On a GPU the selection is exact and
        queued on the current stream: there are always k entries, those past the count index 0
        with value 0 (they add nothing)."""
        n = acc.numel()
        k = self.k(n)
        wire = csparse.wire_index_dtype(n)
        idx = torch.empty(k, dtype=torch.int32 if wire == _lib.INT32 else torch.int64,
                          device=acc.device)
        vals = torch.empty(k, dtype=acc.dtype, device=acc.device)
        flat_grad = None if grad is None else grad.reshape(-1).contiguous()
        grad_ptr = None if flat_grad is None else flat_grad.data_ptr()
        if acc.is_cuda:
            rc = _lib.lib().hvds_topk_feedback_device(
                acc.device.index, torch.cuda.current_stream(acc.device).cuda_stream,
                acc.data_ptr(), grad_ptr, _TO_C[acc.dtype], n, k, idx.data_ptr(), wire,
                vals.data_ptr())
            if rc != _lib.SUCCESS:
                raise RuntimeError("hvdsparse: top-k selection failed: %s" % _lib.last_error())
            return vals, idx
        count = self.native_feedback(acc.data_ptr(), grad_ptr, _TO_C[acc.dtype], n,
                                     idx.data_ptr(), wire, vals.data_ptr())
        return vals[:count], idx[:count]

    def _magnitudes(self, flat):
        """|flat| in a reused buffer: a fresh tensor of that size each step costs more in page
        faults than the abs itself."""
        key = (flat.dtype, flat.device)
        buf = self._scratch.get(key)
        if buf is None or buf.numel() < flat.numel():
            buf = self._scratch[key] = torch.empty(flat.numel(), dtype=flat.dtype,
                                                   device=flat.device)
        return torch.abs(flat, out=buf[:flat.numel()])

    def select(self, flat):
        """(values, indices): the k entries of the 1-D tensor flat largest in magnitude (in C:
        increasing index order, int32 indices when they fit, zeros left out on the CPU and
        padded as (0, 0) on a GPU; otherwise int64 indices in no particular order)."""
        if self._native_ok(flat):
            return self._native(flat.clone(), None)
        n = flat.numel()
        k = self.k(n)
        if k >= n:
            idx = torch.arange(n, device=flat.device)
        elif self.sampled(n):
            idx = self._sampled(self._magnitudes(flat), k)
        else:
            idx = torch.topk(flat.abs(), k, sorted=False).indices
        return flat[idx], idx

    def _sampled(self, mag, k):
        n = mag.numel()
        m, rank = self.sample_plan(n)
        pick = torch.randint(0, n, (m,), generator=self._gen).to(mag.device)
        threshold = torch.topk(mag[pick], rank, sorted=False).values.min()
        cand = torch.nonzero(mag >= threshold).squeeze(1)
        if cand.numel() < k:  # an unlucky sample: the exact top-k keeps the count at k
            self.fallbacks += 1
            return torch.topk(mag, k, sorted=False).indices
        if cand.numel() == k:
            return cand
        return cand[torch.topk(mag[cand], k, sorted=False).indices]

    def feedback(self, tensor, residual):
        """Error feedback: acc = residual + tensor, select from acc, residual = acc - sent (in
        place; residual has tensor's shape, or is None for no feedback). Returns (values,
        flat indices)."""
        if residual is None:
            return self.select(tensor.reshape(-1))
        if self._native_ok(residual, tensor):
            return self._native(residual.view(-1), tensor)
        acc = residual.view(-1)
        acc.add_(tensor.reshape(-1))
        values, idx = self.select(acc)
        acc[idx] = 0  # the sent values are exact copies: acc - sent is 0 there
        return values, idx

    def compress(self, tensor, residual=None):
        """(a 1-D sparse COO tensor of numel elements holding the top k, ctx). For
        hvd.sparse_allreduce by hand; the optimizer uses feedback() directly."""
        values, idx = self.feedback(tensor, residual)
        if values.is_cuda:  # the GPU selection's padding would repeat index 0
            sent = values != 0
            values, idx = values[sent], idx[sent]
        coo = torch.sparse_coo_tensor(idx.unsqueeze(0), values, (tensor.numel(),))
        return coo, tuple(tensor.shape)

    def decompress(self, tensor, ctx):
        """The dense tensor of shape ctx for a (sparse or dense) 1-D result."""
        dense = tensor.to_dense() if tensor.is_sparse else tensor
        return dense.reshape(ctx)


def allreduce_into_async(values, indices, out, name, op, prescale, postscale, process_set,
                         algorithm=None, quant_bits=0):
    """Starts the sparse allreduce of (values, flat indices) over out's elements with the
    result written densely into out (contiguous); returns a handle for mpi_ops.synchronize(),
    which returns out. A CUDA out on the NCCL route runs on the GPU (gpu_sparse's
    dense_allgather, split and recursive_doubling) unless the call needs the runtime's sparse
    path (quantized values with dense or allgather named)."""
    require_init()
    _check_device(out)
    if algorithm is not None:
        _lib.check_sparse_algorithm(algorithm)
    if out.is_cuda and basics.gpu_operations_routed():
        if dense_allgather.runs_here(algorithm, op, quant_bits):
            return dense_allgather.topk_into_async(values, indices, out, name, op, prescale,
                                                   postscale, process_set, algorithm)
        if split.runs_here(algorithm, op, quant_bits):
            return split.split_into_async(values, indices, out, name, op, prescale, postscale,
                                          process_set, algorithm, quant_bits)
        if recursive_doubling.runs_here(algorithm, op):
            return recursive_doubling.rd_into_async(values, indices, out, name, op, prescale,
                                                    postscale, process_set)
    gpu_out = out if out.is_cuda else None
    if gpu_out is not None:  # staged here: the sparse path runs on host memory (docs/gpu.md)
        out = torch.empty(out.shape, dtype=out.dtype)
        values, indices = values.cpu(), indices.cpu()
        sent = values != 0  # the GPU selection's padding (index 0, value 0) repeats an index
        values, indices = values[sent], indices[sent]
    n = out.numel()
    wire = csparse.wire_index_dtype(n)
    idx = indices.to(torch.int32 if wire == _lib.INT32 else torch.int64).contiguous()
    vals = values.to(out.dtype).contiguous()
    st = csparse.tensor(_lib.SPARSE_COO, idx.data_ptr() if idx.numel() else None, wire,
                        vals.data_ptr() if vals.numel() else None, _TO_C[out.dtype],
                        idx.numel(), [n])
    opts = _options("sparse_allreduce", name, process_set, op, prescale, postscale,
                    sparse_algorithm=algorithm)
    if quant_bits:
        opts.sparse_quant_bits = quant_bits
    flat = out.view(-1)
    dense = _view(flat)
    h = handles.enqueue(csparse.enqueue_fn(), ctypes.byref(st), ctypes.byref(dense),
                        ctypes.byref(opts))
    _register(h, (idx, vals, st, opts, dense, flat),
              lambda _h: out if gpu_out is None else gpu_out.copy_(out))
    return h


class Pending:
    """The optimizer's record of one top-k allreduce in flight: the buffer receiving the result
    (p.grad itself when contiguous)."""
    __slots__ = ("out",)

    def __init__(self, out):
        self.out = out

    def finish(self, p, handle, synchronize):
        out = synchronize(handle)
        if out is not p.grad:
            p.grad.copy_(out)


class ResidualStateMixin:
    """The residuals as optimizer state, and the top-k path of a gradient; a base of the
    DistributedOptimizer's mixin. Expects self._topk (the compressor or None) and
    self.param_groups."""

    def _topk_allreduce_async(self, p, grad, name, op, prescale, postscale, process_set,
                              algorithm, quant_bits):
        """Error feedback and selection on grad, then the sparse allreduce whose averaged dense
        result lands in grad; returns (handle, Pending)."""
        values, idx = self._topk.feedback(grad, self._topk_residual(p))
        out = grad if grad.is_contiguous() else torch.empty_like(
            grad, memory_format=torch.contiguous_format)
        handle = allreduce_into_async(values, idx, out, name, op, prescale, postscale,
                                      process_set, algorithm, quant_bits)
        return handle, Pending(out)

    @property
    def _topk_residuals(self):
        if "_hvds_residuals" not in self.__dict__:
            self.__dict__["_hvds_residuals"] = {}
        return self.__dict__["_hvds_residuals"]

    def _topk_applies(self, p):
        return self._topk is not None and self._topk.applies(p.numel())

    def _topk_residual(self, p):
        """p's residual, created as zeros on first use."""
        r = self._topk_residuals.get(p)
        if r is None:
            r = torch.zeros_like(p.data, memory_format=torch.contiguous_format)
            self._topk_residuals[p] = r
        return r

    def _all_params(self):
        return [p for g in self.param_groups for p in g["params"]]

    def state_dict(self):
        sd = super().state_dict()
        if self._topk_residuals:
            index = {p: i for i, p in enumerate(self._all_params())}
            sd[STATE_KEY] = {RESIDUAL_KEY: {index[p]: r for p, r in self._topk_residuals.items()
                                            if p in index}}
        return sd

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        extra = state_dict.pop(STATE_KEY, None) or {}
        super().load_state_dict(state_dict)
        params = self._all_params()
        self._topk_residuals.clear()
        for i, r in (extra.get(RESIDUAL_KEY) or {}).items():
            p = params[int(i)]
            self._topk_residuals[p] = r.detach().to(device=p.device, dtype=p.dtype).reshape(
                p.shape).clone(memory_format=torch.contiguous_format)

    def _hvds_extra_state(self):
        """(name, tensor) pairs for hvd.broadcast_optimizer_state: every compressed parameter's
        residual (zeros created where missing, so every rank lists the same tensors)."""
        out = []
        for i, p in enumerate(self._all_params()):
            if p.requires_grad and self._topk_applies(p):
                out.append(("optimizer.%s.%d" % (RESIDUAL_KEY, i), self._topk_residual(p)))
        return out
