"""The split sparse allreduces of a CUDA top-k gradient on the NCCL route (gpu_sparse/split.py:
ssar_split_allgather, dsar_split_allgather and zen from the routed alltoall and allgather). The
functions take tensors of any device, so these tests run them on CPU tensors through the real
runtime: results, the owners' rule against the runtime's own, and failures on every rank. This
proves the control flow and the arithmetic; test/gpu/torch_gpu_checks.py runs them on a GPU."""
import ctypes

import numpy as np
import pytest
import torch

import hvdsparse.torch as hvd
from hvdsparse.common import _lib
from hvdsparse.common import quantize as qref
from hvdsparse.torch.gpu_sparse import dense_allgather, quantizer, split
from hvdsparse.torch.gpu_sparse.split_owners import ZenHash, owners
from hvdsparse.torch.topk import allreduce_into_async

from conftest import clash_with_the_runtimes_path, rank_pairs, same_bits_everywhere
from conftest import pairs_sum as reference

ALGORITHMS = split.ALGORITHMS


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("op,prescale,postscale", [(hvd.Sum, 1.0, 1.0), (hvd.Average, 2.0, 0.5)])
def test_split_algorithms_equal_the_sum_of_every_ranks_pairs(algorithm, op, prescale, postscale):
    n, ks = 97, [9 + 3 * r for r in range(hvd.size())]  # counts may differ by rank here
    want = reference(n, ks, op, prescale, postscale)
    idx, vals = rank_pairs(hvd.rank(), n, ks[hvd.rank()])
    out = torch.full((97,), 99.0, dtype=torch.float64)  # stale values must not survive
    h = split.split_into_async(vals, idx, out, "split.%s.%d" % (algorithm, op), op, prescale,
                               postscale, hvd.global_process_set, algorithm)
    assert isinstance(h, hvd.mpi_ops.ChainedHandle)
    got = hvd.synchronize(h)
    assert got is out
    if op == hvd.Sum:  # integers: exact
        assert torch.equal(out, want)
    else:
        torch.testing.assert_close(out, want, rtol=1e-15, atol=0)
    assert hvd.poll(h)
    assert same_bits_everywhere(out, "split.check.%s.%d" % (algorithm, op))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_split_algorithms_equal_the_runtimes_own(algorithm):
    """The same pairs through the runtime's sparse path with the same algorithm (the staged
    path a CUDA gradient took before): the same values."""
    n, k = 1000, 40
    idx, vals = rank_pairs(hvd.rank(), n, k, seed=900)
    ours = torch.zeros(n, dtype=torch.float64)
    theirs = torch.zeros(n, dtype=torch.float64)
    hvd.synchronize(split.split_into_async(vals, idx, ours, "split.ours." + algorithm,
                                           hvd.Average, 1.0, 1.0, hvd.global_process_set,
                                           algorithm))
    sent = vals != 0
    hvd.synchronize(allreduce_into_async(vals[sent], idx[sent], theirs,
                                         "split.theirs." + algorithm, hvd.Average, 1.0, 1.0,
                                         hvd.global_process_set, algorithm))
    torch.testing.assert_close(ours, theirs, rtol=1e-15, atol=0)


def test_empty_ranks_a_tiny_tensor_and_unnamed_calls():
    """n below the number of ranks (an owner with an empty range), a rank with nothing to send,
    and no name (the pull's name is derived in call order, as Horovod's unnamed ones)."""
    for algorithm in ALGORITHMS:
        n = 2
        k = 0 if hvd.rank() == 1 else 1
        idx = torch.tensor([hvd.rank() % n] * k, dtype=torch.int32)
        vals = torch.tensor([float(hvd.rank() + 1)] * k, dtype=torch.float64)
        out = torch.zeros(n, dtype=torch.float64)
        hvd.synchronize(split.split_into_async(vals, idx, out, None, hvd.Sum, 1.0, 1.0,
                                               hvd.global_process_set, algorithm))
        want = torch.zeros(n, dtype=torch.float64)
        for r in range(hvd.size()):
            if r != 1:
                want[r % n] += r + 1
        assert torch.equal(out, want), algorithm


def test_ranks_may_synchronize_in_different_orders():
    """The pull is enqueued by the chain's thread, not by synchronize: rank 0 waits for b first,
    the others for a first, and neither waits forever."""
    n = 64
    idx, vals = rank_pairs(hvd.rank(), n, 8)
    outs = [torch.zeros(n, dtype=torch.float64) for _ in range(2)]
    hs = [split.split_into_async(vals, idx, outs[i], "split.order.%d" % i, hvd.Sum, 1.0, 1.0,
                                 hvd.global_process_set, ALGORITHMS[i]) for i in range(2)]
    order = [1, 0] if hvd.rank() == 0 else [0, 1]
    for i in order:
        hvd.synchronize(hs[i])
    want = reference(n, [8] * hvd.size(), hvd.Sum, 1.0, 1.0)
    assert torch.equal(outs[0], want) and torch.equal(outs[1], want)


def test_a_process_set_splits_among_its_members():
    # At np 2 ranks 0 and 1 are the global set, which add_process_set refuses as a duplicate.
    ps = hvd.global_process_set if hvd.size() == 2 else hvd.add_process_set([0, 1])
    try:
        if ps.included():
            n = 50
            idx, vals = rank_pairs(ps.rank(), n, 7)
            out = torch.zeros(n, dtype=torch.float64)
            hvd.synchronize(split.split_into_async(vals, idx, out, "split.ps", hvd.Sum, 1.0,
                                                   1.0, ps, "zen"))
            assert torch.equal(out, reference(n, [7, 7], hvd.Sum, 1.0, 1.0))
    finally:
        if ps is not hvd.global_process_set:
            hvd.remove_process_set(ps)


def test_different_algorithms_fail_every_rank_naming_the_rank():
    algorithm = "zen" if hvd.rank() == 0 else "ssar_split_allgather"
    out = torch.zeros(30, dtype=torch.float64)
    idx, vals = rank_pairs(hvd.rank(), 30, 4)
    h = split.split_into_async(vals, idx, out, "split.mixed", hvd.Sum, 1.0, 1.0,
                               hvd.global_process_set, algorithm)
    other = "rank 1 ran ssar_split_allgather" if hvd.rank() == 0 else "rank 0 ran zen"
    with pytest.raises(ValueError, match="'split.mixed': %s over 30 elements, this rank" % other):
        hvd.synchronize(h)


def test_an_index_outside_the_tensor_fails_every_rank_naming_the_sender():
    idx, vals = rank_pairs(hvd.rank(), 30, 4)
    if hvd.rank() == 1:
        idx[0] = 30
    out = torch.zeros(30, dtype=torch.float64)
    h = split.split_into_async(vals, idx, out, "split.bad", hvd.Sum, 1.0, 1.0,
                               hvd.global_process_set, "dsar_split_allgather")
    with pytest.raises(ValueError, match="'split.bad': rank 1 sent an index outside the "
                                         "tensor's 30 elements"):
        hvd.synchronize(h)


def test_beside_the_runtimes_path_the_names_clash_on_every_rank():
    clash_with_the_runtimes_path(
        "split.clash", "zen", lambda vals, idx, out, name: split.split_into_async(
            vals, idx, out, name, hvd.Sum, 1.0, 1.0, hvd.global_process_set, "zen"))


def test_zen_owners_are_the_runtimes():
    """The job's key is the same on every rank, and the torch permutation and owners equal the
    runtime's hvds__zen_hash and hvds__zen_owner bit for bit."""
    key = _lib.lib().hvds_zen_key()
    assert key != 0
    keys = hvd.allgather(torch.tensor([key - (1 << 64) if key >= 1 << 63 else key]),
                         name="split.zen_key")
    assert bool((keys == keys[0]).all())

    class Hash(ctypes.Structure):
        _fields_ = [("dim", ctypes.c_uint64), ("half", ctypes.c_int), ("mask", ctypes.c_uint64),
                    ("key", ctypes.c_uint64 * 4)]
    lib = _lib.lib()
    lib.hvds__zen_hash_init.argtypes = [ctypes.POINTER(Hash), ctypes.c_uint64, ctypes.c_uint64]
    lib.hvds__zen_hash.restype = ctypes.c_uint64
    lib.hvds__zen_hash.argtypes = [ctypes.POINTER(Hash), ctypes.c_uint64]
    lib.hvds__zen_owner.argtypes = [ctypes.c_uint64, ctypes.c_int, ctypes.c_uint64]
    for dim, parts in [(1, 2), (3, 3), (1000, 4), (1 << 24, 16), (3_000_000_007, 5)]:
        h = Hash()
        lib.hvds__zen_hash_init(ctypes.byref(h), dim, key)
        x = torch.unique(torch.randint(0, dim, (500,), dtype=torch.int64))
        hashed = [lib.hvds__zen_hash(ctypes.byref(h), int(v)) for v in x]
        assert ZenHash(dim, key)(x).tolist() == hashed
        assert owners(x, dim, parts, "zen", key).tolist() == [
            lib.hvds__zen_owner(dim, parts, y) for y in hashed]
    x = torch.arange(10)  # ranges start at floor(j * 10 / 3): 0, 3, 6
    assert owners(x, 10, 3, "ssar_split_allgather", 0).tolist() == [0] * 3 + [1] * 3 + [2] * 4
    assert [split.range_lo(10, 3, j) for j in range(4)] == [0, 3, 6, 10]


def test_which_calls_run_here():
    for algorithm in ALGORITHMS:
        assert split.runs_here(algorithm, hvd.Sum, 0)
        assert split.runs_here(algorithm, hvd.Average, 4)  # the owner quantizes its part
        assert not split.runs_here(algorithm, hvd.Max, 0)
    for algorithm in (None, "auto", "dense", "allgather", "ssar_recursive_doubling"):
        assert not split.runs_here(algorithm, hvd.Sum, 0)
    assert split.runs_here(None, hvd.Average, 4) and split.runs_here("auto", hvd.Sum, 2)
    assert not split.runs_here("dense", hvd.Sum, 4)  # dense and allgather ignore the width
    assert not split.runs_here("ssar_recursive_doubling", hvd.Sum, 4)


def test_the_quantized_choice_weighs_the_gathers_bytes():
    # n = 1 M float32 at 4 bits: DSAR gathers about 0.504 n bytes, ZEN 4.504 bytes per union
    # entry, the union at most size * k: ZEN wins below size * k = 111,9xx.
    n, per = 1 << 20, 4 / 8 + 4 / 1024
    edge = int(n * per / (4 + per))
    assert split.choose_quantized(n, edge // 4, 4, 4, 4, 4) == "zen"
    assert split.choose_quantized(n, edge // 4 + 1, 4, 4, 4, 4) == "dsar_split_allgather"
    assert split.choose_quantized(100, 1000, 8, 4, 4, 8) == "dsar_split_allgather"


@pytest.mark.parametrize("k", [5, 400])
def test_auto_with_quantized_values_runs_the_chosen_algorithm(k):
    n = 1000
    want = reference(n, [k] * hvd.size(), hvd.Sum, 1.0, 1.0, seed=80)
    idx, vals = rank_pairs(hvd.rank(), n, k, seed=80)
    out = torch.zeros(n, dtype=torch.float64)
    hvd.synchronize(split.split_into_async(vals, idx, out, "splitq.auto.%d" % k, hvd.Sum, 1.0,
                                           1.0, hvd.global_process_set, None, 8))
    assert float((out - want).abs().max()) <= float(want.abs().max()) / 127 * (1 + 1e-6)
    assert same_bits_everywhere(out, "splitq.auto.check.%d" % k)


@pytest.mark.parametrize("index_dtype,value_dtype", [(torch.int32, torch.float64),
                                                     (torch.int64, torch.float16)])
@pytest.mark.parametrize("rows", [0, 1, 3])
def test_pairs_survive_their_rows_of_bytes(index_dtype, value_dtype, rows):
    """Rows whose width is no multiple of the value's size, one row or none included."""
    idx = torch.arange(rows, dtype=index_dtype) * 7
    vals = (torch.arange(rows) - 1.5).to(value_dtype)
    i, v = dense_allgather.unpack_pairs(dense_allgather.pair_rows(idx, vals), index_dtype,
                                        value_dtype, 1)
    assert torch.equal(i, idx) and torch.equal(v.view(-1), vals)


# ---- quantized gathers ------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
@pytest.mark.parametrize("bits", [2, 4, 8])
def test_the_quantizer_gives_the_runtimes_bytes(dtype, bits):
    g = torch.Generator().manual_seed(bits)
    x = (torch.randn(2500, generator=g) * 3).to(dtype)
    q = quantizer.quantize(x, bits, 12345)
    assert q.dtype == torch.uint8 and q.numel() == quantizer.encoded_bytes(2500, bits)
    want = qref.encode(x.double().numpy() if dtype == torch.float16 else x.numpy(), bits, 12345)
    if dtype != torch.float16:  # the reference takes float32 and float64 as they are
        assert np.array_equal(q.numpy(), want)
    back = quantizer.dequantize(q, 2500, bits, dtype)
    assert back.dtype == dtype
    bound = torch.from_numpy(qref.error_bound(x.double().numpy(), bits))
    if dtype == torch.float16:  # the decoded value is rounded to float16 once more
        bound = bound + x.double().abs() * 2.0 ** -10
    assert bool(((back.double() - x.double()).abs() <= bound * (1 + 1e-6)).all())
    with pytest.raises(ValueError, match="quantize.*bits must be 2, 4 or 8, not 3"):
        quantizer.quantize(x, 3, 1)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("bits", [2, 4, 8])
def test_quantized_gathers_stay_within_the_quantizers_bound(algorithm, bits):
    """The owner quantizes its summed part once and every rank decodes every part: the result
    is the exact sum within one quantization step of its bucket, the same bits on every rank,
    and its zeros (no rank sent the index) stay zeros."""
    n, k = 3000, 300
    want = reference(n, [k] * hvd.size(), hvd.Average, 1.0, 1.0, seed=70)
    idx, vals = rank_pairs(hvd.rank(), n, k, seed=70)
    out = torch.full((n,), 5.0, dtype=torch.float64)
    hvd.synchronize(split.split_into_async(vals, idx, out, "splitq.%s.%d" % (algorithm, bits),
                                           hvd.Average, 1.0, 1.0, hvd.global_process_set,
                                           algorithm, bits))
    step = float(want.abs().max()) / qref.levels(bits)
    assert float((out - want).abs().max()) <= step * (1 + 1e-6)
    assert bool((out[want == 0] == 0).all())
    if bits == 8:  # at 127 levels most values move; at 2 bits most round to 0 or a scale
        assert float((out - want).abs().max()) > 0
    assert same_bits_everywhere(out, "splitq.check.%s.%d" % (algorithm, bits))


def test_ranks_asking_different_widths_fail_every_rank():
    bits = 4 if hvd.rank() == 0 else 8
    idx, vals = rank_pairs(hvd.rank(), 30, 4)
    out = torch.zeros(30, dtype=torch.float64)
    h = split.split_into_async(vals, idx, out, "splitq.mixed", hvd.Sum, 1.0, 1.0,
                               hvd.global_process_set, "zen", bits)
    other = ("rank 1 ran zen with 8-bit values" if hvd.rank() == 0
             else "rank 0 ran zen with 4-bit values")
    with pytest.raises(ValueError, match="'splitq.mixed': %s over 30 elements" % other):
        hvd.synchronize(h)



def test_a_shutdown_fails_a_pending_chained_operation_instead_of_leaving_it_waiting():
    """Rank 0 starts a split allreduce that no other rank joins, then every rank shuts down:
    synchronize raises on rank 0 (the chain's thread saw the first collective fail), nothing
    waits, and the runtime starts again."""
    h = None
    if hvd.rank() == 0:
        idx, vals = rank_pairs(0, 30, 4)
        out = torch.zeros(30, dtype=torch.float64)
        h = split.split_into_async(vals, idx, out, "split.orphan", hvd.Sum, 1.0, 1.0,
                                   hvd.global_process_set, "zen")
    hvd.barrier()
    hvd.shutdown()
    hvd.init()
    if h is not None:
        with pytest.raises(hvd.HorovodInternalError, match="shut down"):
            hvd.synchronize(h)
        assert hvd.poll(h)
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum, name="split.after").item() == hvd.size()


@pytest.mark.parametrize("every_rank", [False, True])
def test_an_owner_failing_before_its_pull_fails_every_rank_instead_of_leaving_them_waiting(
        every_rank):
    """Rank 1's reduce fails after the push (as a GPU allocation would): it raises its own
    error and poisons the pull, so every other rank fails on the pull naming it instead of
    waiting for rank 1's part. Where every rank fails so, every rank's poison meets the others'
    (an empty int8 allgather that runs) and each raises its own error. The runtime works
    after."""
    idx, vals = rank_pairs(hvd.rank(), 40, 6)
    out = torch.zeros(40, dtype=torch.float64)
    real_unpack = split.unpack_pairs

    def failing_unpack(*args):
        raise RuntimeError("CUDA out of memory (a test's)")
    if hvd.rank() == 1 or every_rank:
        split.unpack_pairs = failing_unpack
    try:
        h = split.split_into_async(vals, idx, out, "split.fails.%d" % every_rank, hvd.Sum, 1.0,
                                   1.0, hvd.global_process_set, "ssar_split_allgather")
        if hvd.rank() == 1 or every_rank:
            with pytest.raises(RuntimeError, match="a test's"):
                hvd.synchronize(h)
        else:
            with pytest.raises(hvd.HorovodInternalError, match="Mismatched data types.*INT8.*"
                                                               "sparse_allreduce_pull.split.fails"):
                hvd.synchronize(h)
    finally:
        split.unpack_pairs = real_unpack
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum, name="split.after").item() == hvd.size()
