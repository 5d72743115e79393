"""SparCML's ssar_recursive_doubling for a CUDA top-k gradient on the NCCL route, built from
routed alltoalls so that it runs on the GPU; the runtime's version (ops/sparse/
ssar_recursive_doubling.c) takes host memory. The same tree: fold to P2, the largest power of two
<= P (each even rank below 2 rem, rem = P - P2, hands its pairs to the odd rank above it and sits
out), then for mask = 1, 2, .., P2 / 2 virtual rank v swaps its whole accumulated set of (index,
value) pairs with v ^ mask and merges, then the ranks that sat out get the result back.

Each exchange is one alltoall of pair rows in which a rank sends to at most one rank. The first
is named as the sparse allreduce and opens every part with the header row (part_header), so a
rank on another path fails negotiation with it and ranks that disagree fail together; each later
one is shaped by the merge before it, so chained's threads enqueue them (log2 P2 exchanges, two
more with a fold) and none waits on the order of the ranks' synchronize calls; a rank whose own
part fails between two exchanges poisons the next (chained.py), so every rank fails, none
waits.

A merge adds two sets into their union, a + b on one rank and b + a on its partner: the same
bits, so every rank ends with the same bits, equal to the runtime's (the same sums in the same
tree). Unlike the runtime's, the pairs stay pairs when their union fills in (no switch to dense,
no delta-coded indices); like it, it never quantizes."""
import torch

from hvdsparse.common import _lib, handles, util
from hvdsparse.common.ops import Average, Sum
from hvdsparse.common.process_sets import set_id
from hvdsparse.common.sparse import requested_algorithm, wire_index_dtype
from hvdsparse.torch import chained
from hvdsparse.torch.dense_enqueue import _gather_like
from hvdsparse.torch.gpu_sparse import part_header
from hvdsparse.torch.gpu_sparse.dense_allgather import pair_rows, scale_result, unpack_pairs
from hvdsparse.torch.gpu_sparse.split_pulls import PULL
from hvdsparse.torch.handles import _output, _register

ALGORITHM = "ssar_recursive_doubling"


def runs_here(algorithm, op):
    """True when the call names recursive doubling with Sum or Average (a quantizer width is
    ignored, as the runtime's recursive doubling ignores it)."""
    return requested_algorithm(algorithm) == ALGORITHM and op in (Sum, Average)


def exchanges(size):
    """The exchanges of a job of size ranks, in order and the same on every rank: ("fold", 0),
    ("round", mask) for mask = 1, 2, .., P2 / 2, ("unfold", 0); with P2 and rem."""
    p2 = 1
    while p2 * 2 <= size:
        p2 *= 2
    rem = size - p2
    rounds = []
    mask = 1
    while mask < p2:
        rounds.append(("round", mask))
        mask <<= 1
    return ([("fold", 0)] if rem else []) + rounds + ([("unfold", 0)] if rem else []), p2, rem


def peers(step, rank, rem):
    """(to, source) of rank in step: the rank it sends its pairs to and the one whose pairs it
    receives, None for none (hvds__sparse_fold_plan's virtual ranks)."""
    kind, mask = step
    if kind == "alone":
        return None, None
    folded = rank < 2 * rem
    if kind == "fold":
        return ((rank + 1, None) if rank % 2 == 0 else (None, rank - 1)) if folded else (None, None)
    if kind == "unfold":
        return ((None, rank + 1) if rank % 2 == 0 else (rank - 1, None)) if folded else (None, None)
    if folded and rank % 2 == 0:  # sat out
        return None, None
    v = rank // 2 if folded else rank - rem
    w = v ^ mask
    peer = 2 * w + 1 if w < rem else w + rem
    return peer, peer


def _merge(a, b):
    """The union of two sets of pairs with distinct indices, summed: a's values, then b's."""
    union, slot = torch.unique(torch.cat([a[0], b[0]]), return_inverse=True)
    acc = torch.zeros(union.numel(), dtype=a[1].dtype, device=a[1].device)
    acc.index_add_(0, slot[:a[0].numel()], a[1])
    acc.index_add_(0, slot[a[0].numel():], b[1])
    return union, acc


def _rows(state, to, parts, head, wire):
    """The alltoall's rows and splits: the pairs to rank to (none when to is None), each part
    opened by head when it is given (the first exchange)."""
    payload = pair_rows(state[0].to(wire), state[1])
    counts = [payload.shape[0] if j == to else 0 for j in range(parts)]
    if head is None:
        return payload if to is not None else payload[:0], counts
    head = head.to(payload.device).view(1, -1)
    pieces = [torch.cat([head, payload]) if j == to else head for j in range(parts)]
    return torch.cat(pieces), [c + 1 for c in counts]


def rd_into_async(values, indices, out, name, op, prescale, postscale, process_set):
    """Starts the sparse allreduce of (values, flat indices) by recursive doubling with the dense
    result written into out (contiguous, on the device of values); returns a handle (a
    ChainedHandle with more than one exchange) for hvd.synchronize(), which returns out."""
    n, parts, me = out.numel(), process_set.size(), process_set.rank()
    wire = torch.int32 if wire_index_dtype(n) == _lib.INT32 else torch.int64
    idx = indices.to(device=out.device, dtype=torch.int64)
    vals = values.to(device=out.device, dtype=out.dtype)
    sent = vals != 0  # the GPU selection's padding; a selected value is never zero
    idx, vals = idx[sent], vals[sent]
    bad = not bool(((idx >= 0) & (idx < n)).all())
    empty = (idx[:0], vals[:0])
    # Coalesced once here, so every later set has distinct indices.
    state = _merge(empty, (idx.clamp(0, max(n - 1, 0)),
                           vals * prescale if prescale != 1.0 else vals))
    ib = torch.empty(0, dtype=wire).element_size()
    head = part_header.header(n, ALGORITHM, 0, bad, wire, ib + vals.element_size())
    steps, _, rem = exchanges(parts)
    steps = steps or [("alone", 0)]  # one rank: the header to itself, no pairs
    pull_name = util.op_name(PULL, name, set_id(process_set))[len(PULL) + 1:]
    flat = out.view(-1)

    alltoall = _lib.lib().hvds_alltoall_async

    def stage_name(s):
        return "%s.%s%d" % (pull_name, steps[s][0], steps[s][1])

    def poison(s):
        return lambda: chained.poison(PULL, alltoall, stage_name(s), process_set, out.device,
                                      head.numel(), [0] * parts)

    def enqueue(s, state):
        step = steps[s]
        to, source = peers(step, me, rem)
        send, splits = _rows(state, to, parts, head if s == 0 else None, wire)
        if s == 0:
            h, key, keep = _gather_like("sparse_allreduce", alltoall, send, name, process_set,
                                        splits)
        else:
            h, key, keep = _gather_like(PULL, alltoall, send, stage_name(s), process_set,
                                        splits)

        def finish(hh):
            recv, rsplits = _output(hh, 0, key), handles.received_splits(hh)
            if s == 0:
                starts = part_header.check_headers(recv, rsplits, head, name or pull_name, ib)
            else:
                starts = [sum(rsplits[:r]) for r in range(parts)]
            new = empty if step[0] == "fold" and to is not None else state
            if source is not None:
                rows = recv[starts[source] + (s == 0):starts[source] + rsplits[source]]
                i, v = unpack_pairs(rows, wire, vals.dtype, 1)
                got = (i.to(torch.int64), v.view(-1))
                new = got if step[0] == "unfold" else _merge(new, got)
            if s < len(steps) - 1:
                return new
            flat.zero_()
            flat.index_copy_(0, new[0], new[1])
            scale_result(flat, op, parts, postscale)
            return out
        return _register(h, keep + [send], finish, key)

    def after(s):
        def step(state):
            h = enqueue(s, state)
            return h if s == len(steps) - 1 else chained.More(h, after(s + 1), poison(s + 1))
        return step

    first = enqueue(0, state)
    if len(steps) == 1:
        return first
    stream = torch.cuda.current_stream(out.device) if out.is_cuda else None
    return chained.chain(first, after(1), name or pull_name, stream, poison(1))
