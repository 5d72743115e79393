"""Sparse allreduce of torch sparse COO tensors through hvds_sparse_allreduce_async.

How a tensor of sparse_dim k and dense_dim m travels:
  m > 0 (an nn.Embedding(sparse=True) gradient: indices [1, nnz], values [nnz, D]): ROWS, the
        row id being the row-major flattening of the k sparse indices, the dense shape
        [prod(shape[:k])] + shape[k:];
  m = 0: COO, the index being the row-major flat element index, the dense shape the tensor's.
Indices travel as int32 when the index range allows (half the index bytes), else int64.

The result is a coalesced sparse COO tensor of the input's shape, dtype and sparse_dim: sorted
unique indices, duplicates summed. When the runtime hands back a dense result (the union of the
ranks' entries filled the tensor enough that dense was cheaper), it is converted with
to_sparse(sparse_dim), which keeps the rows holding a non-zero value.
"""
import ctypes

import torch

from hvdsparse.common import _lib, basics
from hvdsparse.common import sparse as csparse
from hvdsparse.common.basics import require_init
from hvdsparse.common.exceptions import HorovodInternalError
from hvdsparse.common.ops import Average, check_sparse_op
from hvdsparse.common.process_sets import global_process_set
from hvdsparse.torch.gpu_sparse import dense_allgather
from hvdsparse.torch.handles import (_TO_C, _alloc_store, _check_device, _enqueue_allocating,
                                     _options, _output, _poll_one, _register, _synchronize_one)

_INDEX_DTYPES = {torch.int32: _lib.INT32, torch.int64: _lib.INT64}
_TORCH_INDEX = {_lib.INT32: torch.int32, _lib.INT64: torch.int64}


def _prod(xs):
    n = 1
    for x in xs:
        n *= int(x)
    return n


def _strides(sizes):
    out, s = [], 1
    for d in reversed(sizes):
        out.append(s)
        s *= int(d)
    return list(reversed(out))


class _Layout:
    """How one tensor travels (see the module comment)."""

    def __init__(self, tensor, index_dtype):
        shape = [int(d) for d in tensor.shape]
        self.shape = shape
        self.k = tensor.sparse_dim()
        self.sparse_shape, self.dense_dims = shape[:self.k], shape[self.k:]
        self.rows = _prod(self.sparse_shape)  # the index range
        if self.dense_dims:
            self.fmt, self.c_shape = _lib.SPARSE_ROWS, [self.rows] + self.dense_dims
        else:
            self.fmt = _lib.SPARSE_COO
            self.c_shape = shape if len(shape) <= _lib.MAX_DIMS else [self.rows]
        if index_dtype is None:
            self.index_dtype = csparse.wire_index_dtype(self.rows)
        elif index_dtype in _INDEX_DTYPES:
            self.index_dtype = _INDEX_DTYPES[index_dtype]
            if self.index_dtype == _lib.INT32 and self.rows > csparse.INT32_LIMIT:
                raise ValueError("index_dtype=torch.int32 cannot address %d indices" % self.rows)
        else:
            raise ValueError("index_dtype must be None, torch.int32 or torch.int64, not %r"
                             % (index_dtype,))


def _check_sparse(tensor):
    if not isinstance(tensor, torch.Tensor) or tensor.layout != torch.sparse_coo:
        raise ValueError("sparse_allreduce expects a torch sparse COO tensor, got %s"
                         % (tensor.layout if isinstance(tensor, torch.Tensor)
                            else type(tensor).__name__))
    _check_device(tensor)
    if tensor.dtype not in _TO_C:
        raise ValueError("Tensor type %s is not supported." % tensor.type())
    if tensor.sparse_dim() < 1:
        raise ValueError("sparse_allreduce needs at least one sparse dimension")


def _flat_indices(tensor, lay):
    """(wire indices, hint): the row-major flat index of every entry in the wire index type.

    An entry with a component outside its dimension is sent as -1, which the runtime rejects
    on every rank; hint then names it for this rank's error message. Indices that do not fit
    an int32 saturate, which keeps them out of range."""
    idx = tensor._indices()
    hint = ""
    if lay.k == 1:
        flat = idx[0]
    else:
        sizes = torch.tensor(lay.sparse_shape, dtype=torch.int64, device=idx.device).unsqueeze(1)
        strides = torch.tensor(_strides(lay.sparse_shape), dtype=torch.int64,
                               device=idx.device).unsqueeze(1)
        bad = ((idx < 0) | (idx >= sizes)).any(0)
        flat = (idx * strides).sum(0)
        if bool(bad.any()):
            pos = int(bad.nonzero()[0, 0])
            hint = (" (this rank's entry %d has index %s, outside the sparse shape %s)"
                    % (pos, tuple(idx[:, pos].tolist()), tuple(lay.sparse_shape)))
            flat = torch.where(bad, torch.full_like(flat, -1), flat)
    if lay.index_dtype == _lib.INT32:
        return flat.clamp(-2 ** 31, 2 ** 31 - 1).to(torch.int32).contiguous(), hint
    return flat.contiguous(), hint


def _take(ptr, count, dtype, store):
    """count elements at ptr as a 1-D torch tensor: the alloc callback's tensor, else a copy of
    runtime-owned memory."""
    if count == 0 or not ptr:
        return torch.empty(0, dtype=dtype)
    t = store.pop(ptr, None)
    if t is not None:
        return t.reshape(-1)[:count]
    out = torch.empty(count, dtype=dtype)
    if ptr != _lib.EMPTY:
        ctypes.memmove(out.data_ptr(), ptr, count * out.element_size())
    return out


def _build(res, lay, dtype, store):
    """The coalesced torch sparse tensor for a finished handle's result."""
    if res.is_dense:
        dense = _take(res.values, lay.rows * _prod(lay.dense_dims), dtype, store)
        return dense.view(lay.shape).to_sparse(lay.k)
    nnz = res.nnz
    flat = _take(res.indices, nnz, _TORCH_INDEX[lay.index_dtype], store).to(torch.int64)
    values = _take(res.values, nnz * _prod(lay.dense_dims), dtype, store)
    values = values.view([nnz] + lay.dense_dims)
    return torch.sparse_coo_tensor(_unflatten(flat, lay), values, lay.shape, is_coalesced=True)


def _unflatten(flat, lay):
    """The [sparse_dim, nnz] torch indices of row-major flat indices (int64)."""
    if lay.k == 1:
        return flat.unsqueeze(0)
    return torch.stack([(flat // s) % d for s, d in zip(_strides(lay.sparse_shape),
                                                         lay.sparse_shape)])


class SparseHandle:
    """What sparse_allreduce_async returns. Call it (Horovod's sparse_allreduce_async returns a
    callable) or pass it to hvd.synchronize() / hvd.poll(); calling it again returns the same
    result. algorithm: the algorithm that ran, once the result is in."""

    def __init__(self, handle, hint):
        self.handle = handle
        self.algorithm = None
        self._hint = hint
        self._done, self._result, self._error = False, None, None

    def __call__(self):
        if not self._done:
            self._done = True
            try:
                self._result = _synchronize_one(self.handle)
            except (ValueError, HorovodInternalError) as e:
                self._error = type(e)(str(e) + self._hint) if self._hint else e
        if self._error is not None:
            raise self._error
        return self._result

    def poll(self):
        return self._done or _poll_one(self.handle)


def sparse_allreduce_async(tensor, name=None, op=Average, process_set=global_process_set,
                           algorithm=None, index_dtype=None, prescale_factor=1.0,
                           postscale_factor=1.0):
    """Starts a sparse allreduce of a torch sparse COO tensor (any order, duplicates allowed);
    returns a SparseHandle. op: Average (default) or Sum. algorithm: None/"auto" (the runtime's
    cost model), "dense", "allgather", "ssar_recursive_doubling", "ssar_split_allgather",
    "dsar_split_allgather" or "zen"; every rank must pass the same. index_dtype: the wire index
    type, torch.int32 or torch.int64 (None: int32 when the index range fits). An index outside
    the tensor's shape on any rank fails the operation on every rank (ValueError naming it).
    prescale_factor and postscale_factor multiply the result.

    Horovod's positional form sparse_allreduce_async(tensor, name, op) works unchanged."""
    check_sparse_op(op)
    if algorithm is not None:
        _lib.check_sparse_algorithm(algorithm)
    require_init()
    _check_sparse(tensor)
    if (tensor.is_cuda and basics.gpu_operations_routed()
            and dense_allgather.runs_here(algorithm, op, 0, ("allgather",))):
        return _allgather_on_device_async(tensor, name, op, process_set, index_dtype,
                                          prescale_factor, postscale_factor)
    device = tensor.device if tensor.is_cuda else None
    if device is not None:  # staged here: the sparse path runs on host memory (docs/gpu.md)
        tensor = tensor.cpu()
    lay = _Layout(tensor, index_dtype)
    indices, hint = _flat_indices(tensor, lay)
    values = tensor._values().contiguous()
    st = csparse.tensor(lay.fmt, indices.data_ptr() if indices.numel() else None,
                        lay.index_dtype, values.data_ptr() if values.numel() else None,
                        _TO_C[tensor.dtype], indices.numel(), lay.c_shape)
    opts = _options("sparse_allreduce", name, process_set, op, prescale_factor,
                    postscale_factor, sparse_algorithm=algorithm)
    h, key = _enqueue_allocating(opts, csparse.enqueue_fn(), ctypes.byref(st), None,
                                 ctypes.byref(opts))
    sh = SparseHandle(h, hint)

    def finish(hh):
        res = csparse.result(hh)
        sh.algorithm = res.algorithm
        out = _build(res, lay, tensor.dtype, _alloc_store.get(key, {}))
        return out if device is None else out.to(device)
    _register(h, (tensor, indices, values, st, opts), finish, key)
    return sh


def _allgather_on_device_async(tensor, name, op, process_set, index_dtype, prescale, postscale):
    """A CUDA sparse tensor on the NCCL route: every rank's entries gathered where they are and
    coalesced there (gpu_sparse.dense_allgather); runs on any device. Returns a SparseHandle."""
    lay = _Layout(tensor, index_dtype)
    indices, hint = _flat_indices(tensor, lay)
    width = _prod(lay.dense_dims)
    values = tensor._values().reshape(-1, width)
    size = process_set.size()
    h, key, keep = dense_allgather.gather_pairs_async(indices, values, name, process_set)
    sh = SparseHandle(h, hint)

    def finish(hh):
        flat, vals = dense_allgather.unpack_pairs(_output(hh, 0, key), indices.dtype, tensor.dtype,
                                                width)
        if bool(((flat < 0) | (flat >= lay.rows)).any()):
            mine = ((indices < 0) | (indices >= lay.rows)).nonzero()
            raise ValueError(
                "sparse allreduce '%s': a rank sent an index outside the tensor's %d rows%s"
                % (name, lay.rows, "" if not mine.numel() else
                   " (this rank's entry %d has index %d)" % (int(mine[0, 0]),
                                                             int(indices[mine[0, 0]]))))
        if prescale != 1.0:
            vals = vals * prescale
        out = torch.sparse_coo_tensor(_unflatten(flat.long(), lay),
                                      vals.view([-1] + lay.dense_dims), lay.shape).coalesce()
        dense_allgather.scale_result(out._values(), op, size, postscale)
        sh.algorithm = "allgather"
        return out
    _register(h, keep + [tensor, indices, values], finish, key)
    return sh


def sparse_allreduce(tensor, name=None, op=Average, process_set=global_process_set,
                     algorithm=None, index_dtype=None, prescale_factor=1.0,
                     postscale_factor=1.0):
    """Sparse allreduce of a torch sparse COO tensor; returns a coalesced sparse tensor of the
    same shape (see sparse_allreduce_async). Not differentiable."""
    return sparse_allreduce_async(tensor, name, op, process_set, algorithm, index_dtype,
                                  prescale_factor, postscale_factor)()
