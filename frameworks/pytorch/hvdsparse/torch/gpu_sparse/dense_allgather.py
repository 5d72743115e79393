"""Sparse allreduces of CUDA tensors on the NCCL route, built from the dense collectives, which
run on the GPU there (the runtime's own sparse algorithms take host memory; docs/gpu.md).

Compression.topk (k pairs on every rank, the result dense in the gradient):
- dense: scatter this rank's (index, value) pairs into zeros, then an allreduce of the dense
  tensor (prescale, op and postscale by the allreduce itself);
- allgather: every rank's pairs gathered as rows of bytes, then summed into zeros rank by rank
  (each rank's indices are distinct, so every rank sums in the same order and gets the same
  bits), divided by the set's size for Average, scaled.
`auto` picks the one that moves fewer bytes per rank (k is the same on every rank, so every
rank picks the same).

A sparse COO tensor (an embedding's gradient; the result a coalesced sparse tensor): allgather
only, Horovod's own way; its number of entries differs by rank, so no rank could choose
alone.

The split algorithms (SparCML's and ZEN's) are split.py's, recursive doubling is
recursive_doubling.py's. Quantized values with the dense or allgather algorithm named need the
runtime's sparse path: such a call on a CUDA tensor stages it through host memory, as does the
host-staged mode.
The functions take tensors of any device: the tests run them on the CPU."""
import torch

from hvdsparse.common import _lib
from hvdsparse.common.ops import Average, Sum
from hvdsparse.common.sparse import requested_algorithm, wire_index_dtype
from hvdsparse.torch.dense_enqueue import _allreduce_async, _gather_like
from hvdsparse.torch.handles import _output, _register

ALGORITHMS = ("dense", "allgather")  # what runs on the GPU for top-k; `auto` chooses


def runs_here(algorithm, op, quant_bits, algorithms=ALGORITHMS):
    """True when these algorithms serve the call: auto or one of algorithms, Sum or Average, no
    quantized values."""
    return (requested_algorithm(algorithm) in ("auto",) + tuple(algorithms)
            and op in (Sum, Average) and not quant_bits)


def choose(n, k, size, index_bytes, value_bytes):
    """dense or allgather, by the bytes each rank receives: a ring allreduce of n values takes
    2 (size - 1) / size of them, the allgather (size - 1) ranks' k pairs."""
    gather = (size - 1) * k * (index_bytes + value_bytes)
    dense = 2.0 * (size - 1) / size * n * value_bytes if size > 1 else n * value_bytes
    return "allgather" if gather < dense else "dense"


# ---- (index, value row) pairs as rows of bytes: one allgather for both ----------------------
def gather_pairs_async(idx, vals, name, process_set):
    """Starts the allgather of this rank's pairs (idx: 1-D; vals: one row per index), named
    as the sparse allreduce it stands for, so a rank taking the runtime's path under the same
    name fails negotiation instead of waiting. Returns (handle, key, keep)."""
    rows = pair_rows(idx, vals)
    h, key, keep = _gather_like("sparse_allreduce", _lib.lib().hvds_allgather_async, rows, name,
                                process_set)
    return h, key, keep + [rows]


def pair_rows(idx, vals):
    """One row of bytes per pair: the index's, then its value row's."""
    k = idx.numel()
    width = vals.shape[1] if vals.dim() == 2 else 1
    return torch.cat([idx.contiguous().view(torch.uint8).view(k, idx.element_size()),
                      vals.contiguous().view(torch.uint8).view(k, width * vals.element_size())],
                     1)


def unpack_pairs(gathered, index_dtype, value_dtype, width):
    """(indices, values [entries, width]) of every rank's rows, in rank order."""
    ib = torch.empty(0, dtype=index_dtype).element_size()
    # Fresh copies: a slice of one row (or none) counts as contiguous but keeps the rows' stride
    # and offset, which a view as a wider dtype refuses.
    idx = gathered[:, :ib].clone(memory_format=torch.contiguous_format)
    vals = gathered[:, ib:].clone(memory_format=torch.contiguous_format)
    return idx.view(index_dtype).view(-1), vals.view(value_dtype).view(-1, width)


# ---- Compression.topk ---------------------------------------------------------------------
def topk_into_async(values, indices, out, name, op, prescale, postscale, process_set,
                    algorithm=None):
    """Starts the sparse allreduce of (values, flat indices), k pairs on every rank, with the
    dense result written into out (contiguous, on the device of values); returns a handle for
    hvd.synchronize(), which returns out."""
    n = out.numel()
    size = process_set.size()
    wire = torch.int32 if wire_index_dtype(n) == _lib.INT32 else torch.int64
    idx = indices.to(device=out.device, dtype=wire)
    vals = values.to(device=out.device, dtype=out.dtype)
    algorithm = requested_algorithm(algorithm)
    if algorithm == "auto":
        algorithm = choose(n, idx.numel(), size, idx.element_size(), vals.element_size())
    if algorithm == "dense":
        flat = out.view(-1)
        flat.zero_()
        flat.index_add_(0, idx, vals)
        return _allreduce_async(out, out, name, op, prescale, postscale, process_set)
    k = idx.numel()
    h, key, keep = gather_pairs_async(idx, vals, name, process_set)

    def finish(handle):
        gathered = _output(handle, 0, key)
        if gathered.shape[0] != size * k:
            raise ValueError(
                "hvdsparse: top-k allreduce of '%s': this rank sent %d entries but the %d ranks "
                "sent %d in all; every rank must compress a tensor of the same size"
                % (name, k, size, gathered.shape[0]))
        all_idx, all_vals = unpack_pairs(gathered, idx.dtype, vals.dtype, 1)
        all_vals = all_vals.view(-1)
        if prescale != 1.0:
            all_vals.mul_(prescale)
        flat = out.view(-1)
        flat.zero_()
        for r in range(size):
            flat.index_add_(0, all_idx[r * k:(r + 1) * k], all_vals[r * k:(r + 1) * k])
        scale_result(flat, op, size, postscale)
        return out

    return _register(h, keep + [idx, vals, out], finish, key)


def scale_result(values, op, size, postscale):
    """The reduction's last steps on summed values, in place: Average divides by the size, then
    postscale multiplies."""
    if op == Average:
        values.div_(size)
    if postscale != 1.0:
        values.mul_(postscale)
