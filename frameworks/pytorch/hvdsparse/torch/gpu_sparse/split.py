"""The split sparse allreduces of Compression.topk on the NCCL route (ssar_split_allgather,
dsar_split_allgather, zen), built from the routed alltoall and allgather so that they run on the
GPU; dense_allgather has the dense and allgather algorithms. The runtime's own versions of these
three take host memory (ops/sparse/).

Push: each rank drops the GPU selection's padding (index 0, value 0), finds every pair's owner
(split_owners: equal index ranges, or ZEN's hashed ranges under the job's key), sorts its pairs by
owner and sends them with one alltoall of rows of bytes, named as the sparse allreduce (a rank
that took another path fails negotiation with it). Each part starts with a header row (the dense
size, the algorithm and quantizer width, whether every index of the sender lay inside the
tensor) that every receiver checks, so ranks that disagree fail together instead of mixing
partitions.
Reduce: the owner adds the parts in rank order, prescaled: dsar into a dense accumulator of its
range, ssar and zen into one slot per distinct index it received.
Pull, once the alltoall is done everywhere (enqueued by chained's thread, so it never waits for
the order of the ranks' synchronize calls; split_pulls): dsar allgathers the dense ranges, ssar
and zen the owners' (index, sum) pairs, quantized by the owner with quantize_bits. Every rank
gets the same bits: each index is summed by its one owner, each part encoded once.

Unlike the runtime's versions: no fold to a power of two (the routed collectives take any number
of ranks), no dense parts, hash bitmaps or delta-coded indices on the wire. Reading the parts'
sizes for the alltoall waits, on the host, for the selection queued on the GPU."""
import itertools

import torch

from hvdsparse.common import _lib, handles, util
from hvdsparse.common.quantize import seed_for
from hvdsparse.common.ops import Average, Sum
from hvdsparse.common.process_sets import set_id
from hvdsparse.common.sparse import requested_algorithm, wire_index_dtype
from hvdsparse.torch import chained
from hvdsparse.torch.dense_enqueue import _gather_like
from hvdsparse.torch.gpu_sparse import part_header
from hvdsparse.torch.gpu_sparse.dense_allgather import pair_rows, unpack_pairs
from hvdsparse.torch.handles import _output, _register
from hvdsparse.torch.gpu_sparse.split_owners import owners
from hvdsparse.torch.gpu_sparse.split_pulls import PULL, pull_dense, pull_pairs, range_lo

ALGORITHMS = ("ssar_split_allgather", "dsar_split_allgather", "zen")
_seeds = itertools.count(1)  # the quantizer's tag: one per call


def runs_here(algorithm, op, quant_bits=0):
    """True when the call asks for one of these algorithms with Sum or Average (quantized values
    or not), or for auto with quantized values (the only algorithms that quantize)."""
    asked = requested_algorithm(algorithm)
    return (asked in ALGORITHMS or (asked == "auto" and quant_bits > 0)) and op in (Sum, Average)


def choose_quantized(n, k, size, index_bytes, value_bytes, bits):
    """dsar_split_allgather or zen for auto with quantized values, by the bytes a rank receives
    in the gather, the push being the same for both: DSAR's (size - 1) / size of the n values
    encoded, ZEN's of the union's indices and encoded values, the union taken at its largest,
    min(n, size * k) (ZEN rather than SSAR: the same bytes, balanced under skewed indices)."""
    per_value = bits / 8.0 + 4.0 / 1024  # the codes and a float32 scale per bucket of 1024
    union = min(n, size * k)
    return "zen" if union * (index_bytes + per_value) < n * per_value else "dsar_split_allgather"


def _push_rows(idx, vals, owner, parts, header):
    """The alltoall's rows (part j: the header, then the pairs owned by j in index order) and
    its splits."""
    order = torch.argsort(owner, stable=True)
    owner = owner[order]
    counts = torch.bincount(owner, minlength=parts)
    k = idx.numel()
    send = torch.empty((k + parts, header.numel()), dtype=torch.uint8, device=idx.device)
    starts = torch.cumsum(counts + 1, 0) - (counts + 1)
    send[starts] = header.to(idx.device)
    if k:
        send[torch.arange(k, device=idx.device) + owner + 1] = pair_rows(idx[order], vals[order])
    return send, [int(c) + 1 for c in counts.tolist()]


def split_into_async(values, indices, out, name, op, prescale, postscale, process_set, algorithm,
                     quant_bits=0):
    """Starts the sparse allreduce of (values, flat indices) with algorithm (one of ALGORITHMS,
    or auto with quant_bits) and the dense result written into out (contiguous, on the device of
    values), its gather quantized at quant_bits (0: not); returns a ChainedHandle for
    hvd.synchronize(), which returns out."""
    algorithm = requested_algorithm(algorithm)
    n, parts, me = out.numel(), process_set.size(), process_set.rank()
    wire = torch.int32 if wire_index_dtype(n) == _lib.INT32 else torch.int64
    if algorithm == "auto":  # k is the selection's size, the same on every rank
        algorithm = choose_quantized(n, values.numel(), parts,
                                     torch.empty(0, dtype=wire).element_size(),
                                     out.element_size(), quant_bits)
    idx = indices.to(device=out.device, dtype=wire)
    vals = values.to(device=out.device, dtype=out.dtype)
    sent = vals != 0  # the GPU selection's padding; a selected value is never zero
    idx, vals = idx[sent], vals[sent]
    inside = (idx >= 0) & (idx < n)
    bad = not bool(inside.all())
    zen_key = _lib.lib().hvds_zen_key() if algorithm == "zen" or quant_bits else 0
    owner = owners(idx.clamp(0, max(n - 1, 0)), n, parts, algorithm, zen_key)
    ib = idx.element_size()
    header = part_header.header(n, algorithm, quant_bits, bad, wire, ib + vals.element_size())
    send, splits = _push_rows(idx, vals, owner, parts, header)
    h, key, keep = _gather_like("sparse_allreduce", _lib.lib().hvds_alltoall_async, send, name,
                                process_set, splits)

    def received(hh):
        return _output(hh, 0, key), handles.received_splits(hh)
    first = _register(h, keep + [send], received, key)
    pull_name = util.op_name(PULL, name, set_id(process_set))[len(PULL) + 1:]
    # the runtime's rule for a block's seed (hvds__quant_seed): the job's key, a tag, the block
    seed = seed_for(zen_key, next(_seeds), me) if quant_bits else 0

    def pull(result):
        recv, rsplits = result
        starts = part_header.check_headers(recv, rsplits, header, name or pull_name, ib)
        lo = range_lo(n, parts, me)
        length = range_lo(n, parts, me + 1) - lo
        parts_idx, parts_vals = [], []
        for r in range(parts):
            rows = recv[starts[r] + 1:starts[r] + rsplits[r]]
            i, v = unpack_pairs(rows, wire, vals.dtype, 1)
            parts_idx.append(i.to(torch.int64))
            parts_vals.append(v.view(-1) * prescale if prescale != 1.0 else v.view(-1))
        if algorithm == "dsar_split_allgather":
            acc = torch.zeros(length, dtype=vals.dtype, device=vals.device)
            for i, v in zip(parts_idx, parts_vals):
                acc.index_add_(0, i - lo, v)
            return pull_dense(acc, out, op, postscale, pull_name, process_set, quant_bits, seed)
        union, slot = torch.unique(torch.cat(parts_idx), return_inverse=True)
        acc = torch.zeros(union.numel(), dtype=vals.dtype, device=vals.device)
        at = 0
        for v in parts_vals:  # rank by rank: a part's indices are distinct, the order fixed
            acc.index_add_(0, slot[at:at + v.numel()], v)
            at += v.numel()
        return pull_pairs(union.to(wire), acc, out, op, postscale, pull_name, process_set,
                          quant_bits, seed)

    stream = torch.cuda.current_stream(out.device) if out.is_cuda else None
    return chained.chain(first, pull, name or pull_name, stream, lambda: chained.poison(
        PULL, _lib.lib().hvds_allgather_async, pull_name, process_set, out.device))
