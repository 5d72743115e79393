"""SparCML's recursive doubling for a CUDA top-k gradient on the NCCL route
(gpu_sparse/recursive_doubling.py, a chain of routed alltoalls). The functions take tensors of
any device, so these tests run them on CPU tensors through the real runtime: results equal to
the sum of every rank's pairs and to the runtime's own recursive doubling, the exchange plan for
every job size, and failures on every rank. This proves the control flow and the arithmetic;
test/gpu/torch_gpu_checks.py runs it on a GPU."""
import pytest
import torch

import hvdsparse.torch as hvd
from hvdsparse.torch.gpu_sparse import recursive_doubling as rd
from hvdsparse.torch.gpu_sparse import split
from hvdsparse.torch.topk import allreduce_into_async

from conftest import clash_with_the_runtimes_path, rank_pairs, same_bits_everywhere
from conftest import pairs_sum as reference

RD = rd.ALGORITHM


def start(vals, idx, out, name, op=hvd.Sum, prescale=1.0, postscale=1.0, ps=None):
    return rd.rd_into_async(vals, idx, out, name, op, prescale, postscale,
                            ps or hvd.global_process_set)


@pytest.mark.parametrize("size", range(1, 18))
def test_the_plan_sums_every_input_once_on_every_rank(size):
    """The exchanges of every job size, played with sets of inputs: each send meets its
    receive, and every rank ends with every rank's input exactly once."""
    steps, p2, rem = rd.exchanges(size)
    assert p2 & (p2 - 1) == 0 and p2 <= size < 2 * p2 and rem == size - p2
    held = [[r] for r in range(size)]
    for step in steps:
        moves = [rd.peers(step, r, rem) for r in range(size)]
        for r, (to, _) in enumerate(moves):
            if to is not None:
                assert moves[to][1] == r, (step, r)
        nxt = []
        for r, (to, source) in enumerate(moves):
            mine = [] if step[0] == "fold" and to is not None else held[r]
            if source is not None:
                mine = held[source] if step[0] == "unfold" else mine + held[source]
            nxt.append(mine)
        held = nxt
    for r in range(size):
        assert sorted(held[r]) == list(range(size)), (size, r, held[r])
    assert len(steps) == (p2.bit_length() - 1) + (2 if rem else 0)


@pytest.mark.parametrize("op,prescale,postscale", [(hvd.Sum, 1.0, 1.0), (hvd.Average, 2.0, 0.5)])
def test_equals_the_sum_of_every_ranks_pairs(op, prescale, postscale):
    n, ks = 97, [9 + 3 * r for r in range(hvd.size())]  # counts may differ by rank
    want = reference(n, ks, op, prescale, postscale)
    idx, vals = rank_pairs(hvd.rank(), n, ks[hvd.rank()])
    out = torch.full((n,), 99.0, dtype=torch.float64)  # stale values must not survive
    h = start(vals, idx, out, "rd.sum.%d" % op, op, prescale, postscale)
    assert isinstance(h, hvd.mpi_ops.ChainedHandle) == (len(rd.exchanges(hvd.size())[0]) > 1)
    assert hvd.synchronize(h) is out
    if op == hvd.Sum:  # integers: exact
        assert torch.equal(out, want)
    else:
        torch.testing.assert_close(out, want, rtol=1e-15, atol=0)
    assert hvd.poll(h)
    assert same_bits_everywhere(out, "rd.check.%d" % op)


@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average])
def test_the_same_bits_as_the_runtimes_own(op):
    """Fractional values with overlapping indices through the runtime's sparse path with the
    same algorithm (what a CUDA gradient took before): the same sums in the same tree, so the
    same bits."""
    n, k = 5000, 600
    g = torch.Generator().manual_seed(31 + hvd.rank())
    idx = torch.randperm(n // 2, generator=g)[:k].to(torch.int32) * 2
    vals = torch.randn(k, generator=g, dtype=torch.float64) / 7
    ours = torch.zeros(n, dtype=torch.float64)
    theirs = torch.zeros(n, dtype=torch.float64)
    hvd.synchronize(start(vals, idx, ours, "rd.ours.%d" % op, op))
    hvd.synchronize(allreduce_into_async(vals, idx, theirs, "rd.theirs.%d" % op, op, 1.0, 1.0,
                                         hvd.global_process_set, RD))
    assert torch.equal(ours, theirs)
    if hvd.size() > 1:  # the ranks' indices overlap only in part
        assert int((ours != 0).sum()) > k


def test_float32_and_int64_indices():
    """A tensor above 2^31 elements would take int64 indices; here the pairs of a float32 tensor
    whose values differ in the last bits still sum to the same bits everywhere."""
    n = 1000
    idx, vals = rank_pairs(hvd.rank(), n, 50, seed=3)
    vals = vals.float() / 3
    out = torch.zeros(n, dtype=torch.float32)
    hvd.synchronize(start(vals, idx.long(), out, "rd.f32"))
    want = reference(n, [50] * hvd.size(), hvd.Sum, 1.0, 1.0, seed=3) / 3
    torch.testing.assert_close(out.double(), want, rtol=1e-6, atol=1e-5)
    assert same_bits_everywhere(out, "rd.f32.check")


def test_empty_ranks_a_tiny_tensor_and_unnamed_calls():
    n = 2
    k = 0 if hvd.rank() == 1 else 1
    idx = torch.tensor([hvd.rank() % n] * k, dtype=torch.int32)
    vals = torch.tensor([float(hvd.rank() + 1)] * k, dtype=torch.float64)
    for _ in range(2):  # unnamed: the exchanges' names are derived in call order
        out = torch.zeros(n, dtype=torch.float64)
        hvd.synchronize(start(vals, idx, out, None))
        want = torch.zeros(n, dtype=torch.float64)
        for r in range(hvd.size()):
            if r != 1:
                want[r % n] += r + 1
        assert torch.equal(out, want)


def test_ranks_may_synchronize_in_different_orders():
    """Rank 0 waits for the last started first; beside them a split allreduce. Every exchange
    after the first is enqueued by a chain's thread, so nothing waits on another's order."""
    n = 64
    idx, vals = rank_pairs(hvd.rank(), n, 8)
    outs = [torch.zeros(n, dtype=torch.float64) for _ in range(3)]
    hs = [start(vals, idx, outs[0], "rd.order.0"),
          split.split_into_async(vals, idx, outs[1], "rd.order.1", hvd.Sum, 1.0, 1.0,
                                 hvd.global_process_set, "zen"),
          start(vals, idx, outs[2], "rd.order.2")]
    for i in ([2, 1, 0] if hvd.rank() == 0 else [0, 1, 2]):
        hvd.synchronize(hs[i])
    want = reference(n, [8] * hvd.size(), hvd.Sum, 1.0, 1.0)
    assert all(torch.equal(o, want) for o in outs)


def test_a_process_set_doubles_by_its_own_ranks():
    """The set's ranks, not the global ones, pick the partners: from 3 ranks on the set is
    ranks 1.. (global rank 1 is the set's rank 0)."""
    members = list(range(1, hvd.size())) if hvd.size() >= 3 else [0, 1]
    # At np 2 the members are the global set, which add_process_set refuses as a duplicate.
    ps = hvd.global_process_set if hvd.size() == 2 else hvd.add_process_set(members)
    try:
        if ps.included():
            out = torch.zeros(50, dtype=torch.float64)
            idx, vals = rank_pairs(ps.rank(), 50, 7)
            got = hvd.synchronize(start(vals, idx, out, "rd.ps", ps=ps))
            assert torch.equal(got, reference(50, [7] * len(members), hvd.Sum, 1.0, 1.0))
    finally:
        if ps is not hvd.global_process_set:
            hvd.remove_process_set(ps)


def test_another_algorithm_fails_every_rank_naming_the_rank():
    idx, vals = rank_pairs(hvd.rank(), 30, 4)
    out = torch.zeros(30, dtype=torch.float64)
    if hvd.rank() == 0:
        h = start(vals, idx, out, "rd.mixed")
        other = "rank 1 ran zen"
    else:
        h = split.split_into_async(vals, idx, out, "rd.mixed", hvd.Sum, 1.0, 1.0,
                                   hvd.global_process_set, "zen")
        other = "rank 0 ran ssar_recursive_doubling"
    with pytest.raises(ValueError, match="'rd.mixed': %s over 30 elements, this rank" % other):
        hvd.synchronize(h)


def test_an_index_outside_the_tensor_fails_every_rank_naming_the_sender():
    idx, vals = rank_pairs(hvd.rank(), 30, 4)
    if hvd.rank() == hvd.size() - 1:
        idx[0] = -1
    out = torch.zeros(30, dtype=torch.float64)
    h = start(vals, idx, out, "rd.bad")
    with pytest.raises(ValueError, match="'rd.bad': rank %d sent an index outside the "
                                         "tensor's 30 elements" % (hvd.size() - 1)):
        hvd.synchronize(h)


def test_beside_the_runtimes_path_the_names_clash_on_every_rank():
    clash_with_the_runtimes_path("rd.clash", RD, start)


def test_which_calls_run_here():
    assert rd.runs_here(RD, hvd.Sum) and rd.runs_here(RD, hvd.Average)
    assert not rd.runs_here(RD, hvd.Max)
    for algorithm in (None, "auto", "dense", "allgather") + split.ALGORITHMS:
        assert not rd.runs_here(algorithm, hvd.Sum)


def test_a_rank_failing_between_exchanges_fails_every_rank_instead_of_leaving_them_waiting():
    """Rank 1's merge of the first exchange fails (as a GPU allocation would): rank 1 raises its
    own error; it poisons the next exchange, so the others fail on it naming the tensor instead
    of waiting for it (with one exchange there is no next: the others finish). The runtime
    works after."""
    n = 40
    idx, vals = rank_pairs(hvd.rank(), n, 6)
    out = torch.zeros(n, dtype=torch.float64)
    real_merge, calls = rd._merge, []

    def failing_merge(a, b):
        calls.append(1)
        if len(calls) == 2:  # the first was this rank's own input, coalesced
            raise RuntimeError("CUDA out of memory (a test's)")
        return real_merge(a, b)
    if hvd.rank() == 1:
        rd._merge = failing_merge
    try:
        h = start(vals, idx, out, "rd.fails")
        if hvd.rank() == 1:
            with pytest.raises(RuntimeError, match="a test's"):
                hvd.synchronize(h)
        elif len(rd.exchanges(hvd.size())[0]) > 1:
            with pytest.raises(hvd.HorovodInternalError,
                               match="Mismatched data types.*INT8.*sparse_allreduce_pull.rd.fails"):
                hvd.synchronize(h)
        else:
            assert torch.equal(hvd.synchronize(h), reference(n, [6] * hvd.size(), hvd.Sum, 1.0,
                                                             1.0))
    finally:
        rd._merge = real_merge
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum, name="rd.after").item() == hvd.size()
