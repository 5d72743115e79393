"""The second collective of split.py's algorithms: every owner's reduced part
gathered to every rank and written into the dense result, then Average and postscale.

- dense (dsar_split_allgather): each owner's dense range; their concatenation in rank order is
  the result;
- pairs (ssar_split_allgather, zen): each owner's (index, sum) rows, written into zeros (the
  owners' indices are disjoint).

With quantize_bits (2, 4 or 8) the owner encodes its summed values once with the runtime's
quantizer (quantizer.py; never summed while quantized) and every rank, the owner included,
decodes every part, so every rank holds the same values: a dense range travels as its encoding;
a pairs part as [its entry count, 8 bytes][its indices, padded to 8][its encoded values]."""
import torch

from hvdsparse.common import _lib
from hvdsparse.torch.dense_enqueue import _gather_like
from hvdsparse.torch.gpu_sparse.dense_allgather import pair_rows, scale_result, unpack_pairs
from hvdsparse.torch.handles import _output, _register
from hvdsparse.torch.gpu_sparse.quantizer import dequantize, encoded_bytes, quantize

PULL = "sparse_allreduce_pull"  # the second collective's kind in its name


def range_lo(n, parts, j):
    """Start of owner j's range of [0, n) (ops/sparse/sparse_stream.c's rule)."""
    return n * j // parts


def _gather(tensor, pull_name, process_set, keep, finish):
    h, key, kept = _gather_like(PULL, _lib.lib().hvds_allgather_async, tensor, pull_name,
                                process_set)
    return _register(h, kept + [tensor] + keep, lambda hh: finish(_output(hh, 0, key)), key)


def pull_dense(acc, out, op, postscale, pull_name, process_set, bits=0, seed=0):
    """Gathers this owner's dense range acc into out."""
    parts, flat = process_set.size(), out.view(-1)
    n = flat.numel()

    def finish(gathered):
        if not bits:
            flat.copy_(gathered)
        at = 0
        for j in range(parts if bits else 0):
            lo, hi = range_lo(n, parts, j), range_lo(n, parts, j + 1)
            size = encoded_bytes(hi - lo, bits)
            flat[lo:hi] = dequantize(gathered[at:at + size], hi - lo, bits, flat.dtype)
            at += size
        scale_result(flat, op, parts, postscale)
        return out
    return _gather(quantize(acc, bits, seed) if bits else acc, pull_name, process_set, [out],
                   finish)


def _pairs_blob(union, acc, bits, seed):
    """A quantized pairs part: count, indices padded to 8, encoded values (all uint8)."""
    count = torch.tensor([union.numel()], dtype=torch.int64).view(torch.uint8)
    index_bytes = union.contiguous().view(torch.uint8)
    pad = torch.zeros((-index_bytes.numel()) % 8, dtype=torch.uint8, device=union.device)
    return torch.cat([count.to(union.device), index_bytes, pad, quantize(acc, bits, seed)])


def _unpack_blobs(gathered, parts, index_dtype, value_dtype, bits):
    """(indices, values) of every owner's quantized pairs part, in rank order."""
    ib = torch.empty(0, dtype=index_dtype).element_size()
    indices, values, at = [], [], 0
    for _ in range(parts):
        count = int(gathered[at:at + 8].cpu().view(torch.int64)[0])
        at += 8
        indices.append(gathered[at:at + count * ib].clone().view(index_dtype))
        at += count * ib + (-count * ib) % 8
        size = encoded_bytes(count, bits)
        values.append(dequantize(gathered[at:at + size], count, bits, value_dtype))
        at += size
    return torch.cat(indices), torch.cat(values)


def pull_pairs(union, acc, out, op, postscale, pull_name, process_set, bits=0, seed=0):
    """Gathers this owner's (union, acc) pairs into out."""
    parts, flat = process_set.size(), out.view(-1)

    def finish(gathered):
        if bits:
            idx, vals = _unpack_blobs(gathered, parts, union.dtype, acc.dtype, bits)
        else:
            idx, vals = unpack_pairs(gathered, union.dtype, acc.dtype, 1)
        flat.zero_()
        flat.index_copy_(0, idx.to(torch.int64), vals.view(-1))
        scale_result(flat, op, parts, postscale)
        return out
    sent = _pairs_blob(union, acc, bits, seed) if bits else pair_rows(union, acc)
    return _gather(sent, pull_name, process_set, [out], finish)
