"""Every collective, dtype and op; in-place, async and grouped forms; errors on every rank."""
import itertools

import pytest
import torch

import hvdsparse.torch as hvd
from conftest import rank_values

INT_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]
FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
ALL_DTYPES = INT_DTYPES + FLOAT_DTYPES + [torch.bool]
OPS = [hvd.Sum, hvd.Average, hvd.Min, hvd.Max, hvd.Product]
SHAPES = [(17,), (5, 3), (2, 3, 4), ()]


def expected_reduce(op, shape, dtype):
    size = hvd.size()
    stack = torch.stack([rank_values(r, shape, torch.float64) for r in range(size)])
    if op in (hvd.Sum, hvd.Average):
        out = stack.sum(0)
    elif op == hvd.Min:
        out = stack.min(0).values
    elif op == hvd.Max:
        out = stack.max(0).values
    else:
        out = stack.prod(0)
    if dtype == torch.bool:
        nz = stack != 0
        return (nz.all(0) if op in (hvd.Min, hvd.Product) else nz.any(0))
    if op == hvd.Average:
        out = out / size
        if not dtype.is_floating_point:
            out = out.trunc()
    return out.to(dtype)


def close(a, b):
    if a.dtype in (torch.float16, torch.bfloat16):
        return torch.allclose(a.double(), b.double(), rtol=1e-2, atol=1e-2)
    return torch.equal(a, b)


def cases():
    for dtype, op in itertools.product(ALL_DTYPES, OPS):
        if dtype == torch.bool and op == hvd.Average:
            continue
        yield dtype, op


@pytest.mark.parametrize("dtype,op", list(cases()))
def test_allreduce_dtype_op(dtype, op):
    for i, shape in enumerate(SHAPES):
        x = rank_values(hvd.rank(), shape, dtype)
        out = hvd.allreduce(x, op=op, name="ar.%s.%d.%d" % (dtype, op, i))
        assert out.shape == x.shape and out.dtype == dtype
        want = expected_reduce(op, shape, dtype)
        assert close(out, want), (out, want)
        assert torch.equal(x, rank_values(hvd.rank(), shape, dtype))  # input untouched


def test_allreduce_inplace_async_fused():
    size = hvd.size()
    tensors = [rank_values(hvd.rank(), (3, 4), dt) for dt in INT_DTYPES + FLOAT_DTYPES]
    handles = [hvd.allreduce_async_(t, op=hvd.Sum) for t in tensors]
    seen_pending = any(not hvd.poll(h) for h in handles)
    for t, h in zip(tensors, handles):
        out = hvd.synchronize(h)
        assert out is t
        assert close(t, expected_reduce(hvd.Sum, (3, 4), t.dtype))
    assert seen_pending or size >= 1
    x = torch.arange(6, dtype=torch.float32)
    h = hvd.allreduce_async(x, op=hvd.Average, name="async_oop")
    out = hvd.synchronize(h)
    assert torch.equal(out, x) and out.data_ptr() != x.data_ptr()
    y = torch.ones(4)
    assert hvd.allreduce_(y, op=hvd.Sum) is y and y.tolist() == [size] * 4


def test_allreduce_noncontiguous_and_scales():
    size = hvd.size()
    base = torch.arange(12, dtype=torch.float64).reshape(3, 4)
    t = base.t()  # not contiguous
    out = hvd.allreduce(t, op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.5)
    assert torch.allclose(out, t * size)
    inplace = base.clone().t()
    hvd.allreduce_(inplace, op=hvd.Average)
    assert torch.allclose(inplace, base.t())
    out = hvd.allreduce(torch.ones(5), op=hvd.Average, postscale_factor=3.0)
    assert torch.allclose(out, torch.full((5,), 3.0))


def test_allreduce_compression():
    x = torch.full((8,), 1.5)
    for comp in (hvd.Compression.none, hvd.Compression.fp16, hvd.Compression.bf16):
        out = hvd.allreduce(x, op=hvd.Sum, compression=comp)
        assert out.dtype == torch.float32
        assert torch.allclose(out, x * hvd.size())


def test_grouped_allreduce():
    size = hvd.size()
    tensors = [torch.full((k + 1, 2), float(hvd.rank() + k)) for k in range(5)]
    outs = hvd.grouped_allreduce(tensors, op=hvd.Sum, name="grp")
    for k, o in enumerate(outs):
        assert torch.equal(o, torch.full((k + 1, 2), float(sum(range(size)) + k * size)))
    outs = hvd.grouped_allreduce(tensors, op=hvd.Average)
    for k, o in enumerate(outs):
        assert torch.allclose(o, torch.full((k + 1, 2), sum(range(size)) / size + k))
    copies = [t.clone() for t in tensors]
    res = hvd.grouped_allreduce_(copies, op=hvd.Max)
    assert all(r is c for r, c in zip(res, copies))
    assert torch.equal(copies[0], torch.full((1, 2), float(size - 1)))
    h = hvd.grouped_allreduce_async([torch.ones(3), torch.ones(2)], op=hvd.Sum)
    assert [o.tolist() for o in hvd.synchronize(h)] == [[size] * 3, [size] * 2]


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_allgather_variable_size(dtype):
    size, rank = hvd.size(), hvd.rank()
    sizes = [17, 32, 81, 12, 15, 23, 22][:size]
    for dim in (1, 2, 3):
        x = (torch.ones([sizes[rank]] + [3] * (dim - 1)) * rank).to(dtype)
        g = hvd.allgather(x)
        assert list(g.shape) == [sum(sizes)] + [3] * (dim - 1) and g.dtype == dtype
        off = 0
        for r in range(size):
            part = g[off:off + sizes[r]]
            assert torch.equal(part, (torch.ones_like(part, dtype=torch.float64) * r).to(dtype))
            off += sizes[r]


def test_allgather_async_empty_and_grouped():
    size, rank = hvd.size(), hvd.rank()
    handles = [hvd.allgather_async(torch.full((2, 2), float(rank + k)), name="ag%d" % k)
               for k in range(4)]
    for k, h in enumerate(handles):
        out = hvd.synchronize(h)
        assert torch.equal(out, torch.cat([torch.full((2, 2), float(r + k)) for r in range(size)]))
    empty = torch.empty((0 if rank == 0 else 1, 3))
    out = hvd.allgather(empty)
    assert out.shape == (size - 1, 3)
    outs = hvd.grouped_allgather([torch.ones(1) * rank, torch.ones(2, 2) * rank])
    assert outs[0].tolist() == list(map(float, range(size)))
    assert outs[1].shape == (2 * size, 2)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_broadcast(dtype):
    size, rank = hvd.size(), hvd.rank()
    for root, dim in itertools.product(range(size), (1, 2, 3)):
        x = (torch.ones([4] * dim) * rank).to(dtype)
        root_t = (torch.ones([4] * dim) * root).to(dtype)
        out = hvd.broadcast(x, root)
        assert torch.equal(out, root_t)
        if rank != root and dtype != torch.bool:
            assert not torch.equal(x, root_t)  # input untouched
        hvd.broadcast_(x, root)
        assert torch.equal(x, root_t)


def test_broadcast_async():
    size, rank = hvd.size(), hvd.rank()
    xs = [torch.full((3,), float(rank)) for _ in range(3)]
    hs = [hvd.broadcast_async_(x, size - 1, name="bc%d" % i) for i, x in enumerate(xs)]
    for x, h in zip(xs, hs):
        assert hvd.synchronize(h) is x and x.tolist() == [float(size - 1)] * 3
    h = hvd.broadcast_async(torch.full((2,), float(rank)), 0)
    assert hvd.synchronize(h).tolist() == [0.0, 0.0]


def test_alltoall_equal_and_splits():
    size, rank = hvd.size(), hvd.rank()
    for dtype in (torch.int32, torch.float32, torch.float16, torch.bfloat16, torch.uint8):
        x = torch.cat([torch.full((2, 3), float(rank * 10 + r)) for r in range(size)]).to(dtype)
        out = hvd.alltoall(x)
        exp = torch.cat([torch.full((2, 3), float(r * 10 + rank)) for r in range(size)]).to(dtype)
        assert torch.equal(out, exp)
    # rank r sends r + 1 + d rows to rank d
    splits = [rank + 1 + d for d in range(size)]
    x = torch.cat([torch.full((s, 2), float(rank * 10 + d)) for d, s in enumerate(splits)])
    out, received = hvd.alltoall(x, splits=splits)
    exp_splits = [r + 1 + rank for r in range(size)]
    assert received.tolist() == exp_splits
    assert torch.equal(out, torch.cat([torch.full((s, 2), float(r * 10 + rank))
                                       for r, s in enumerate(exp_splits)]))
    out2, rec2 = hvd.alltoall(x, splits=torch.tensor(splits, dtype=torch.int32))
    assert torch.equal(out2, out) and torch.equal(rec2, received)
    zero = [0] * size
    out, received = hvd.alltoall(torch.empty(0, 2), splits=zero)
    assert out.shape == (0, 2) and received.tolist() == zero


def test_alltoall_split_errors():
    size = hvd.size()
    with pytest.raises(ValueError):
        hvd.alltoall(torch.ones(size * 2 + 1))  # not divisible, no splits
    with pytest.raises(ValueError):
        hvd.alltoall(torch.ones(4), splits=[5] * size)  # sum too large
    with pytest.raises(ValueError):
        hvd.alltoall(torch.ones(4), splits=[1])  # wrong length (size >= 2)
    with pytest.raises(ValueError):
        hvd.alltoall(torch.ones(4), splits=torch.ones(size, dtype=torch.float32))


def test_reducescatter():
    size, rank = hvd.size(), hvd.rank()
    for dtype, op in itertools.product((torch.int32, torch.float32, torch.float64,
                                        torch.bfloat16), (hvd.Sum, hvd.Average)):
        for rows in (size * 4, size * 4 + 1, 1):
            x = (torch.arange(rows * 3, dtype=torch.float64).reshape(rows, 3) + rank).to(dtype)
            out = hvd.reducescatter(x, op=op)
            full = sum(torch.arange(rows * 3, dtype=torch.float64).reshape(rows, 3) + r
                       for r in range(size))
            if op == hvd.Average:
                full = full / size
                if not dtype.is_floating_point:
                    full = full.trunc()
            per, extra = divmod(rows, size)
            start = rank * per + min(rank, extra)
            mine = full[start:start + per + (1 if rank < extra else 0)].to(dtype)
            assert close(out, mine), (dtype, op, rows, out, mine)
    out = hvd.reducescatter(torch.ones(size * 2, 2), op=hvd.Sum, prescale_factor=2.0,
                            postscale_factor=0.5)
    assert torch.equal(out, torch.full((2, 2), float(size)))
    with pytest.raises(ValueError):
        hvd.reducescatter(torch.tensor(1.0))


def test_grouped_reducescatter():
    size, rank = hvd.size(), hvd.rank()
    xs = [torch.full((size * 2, 2), float(rank)), torch.full((size, 3), 1.0)]
    outs = hvd.grouped_reducescatter(xs, op=hvd.Sum)
    assert torch.equal(outs[0], torch.full((2, 2), float(sum(range(size)))))
    assert torch.equal(outs[1], torch.full((1, 3), float(size)))
    h = hvd.reducescatter_async(torch.ones(size * 3), op=hvd.Average)
    assert torch.equal(hvd.synchronize(h), torch.ones(3))


def expect_error_everywhere(fn, exc=RuntimeError):
    with pytest.raises(exc):
        fn()
    # the runtime stays usable afterwards
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum).item() == hvd.size()


def test_errors_raised_on_every_rank():
    rank = hvd.rank()
    expect_error_everywhere(lambda: hvd.allreduce(torch.ones(17 + rank), name="e.shape"),
                            hvd.HorovodInternalError)
    dt = torch.int32 if rank == 0 else torch.float32
    expect_error_everywhere(lambda: hvd.allreduce(torch.ones(3, dtype=dt), name="e.dtype"))
    op = hvd.Sum if rank == 0 else hvd.Max
    expect_error_everywhere(lambda: hvd.allreduce(torch.ones(3), op=op, name="e.op"))
    expect_error_everywhere(lambda: hvd.broadcast(torch.ones(3), root_rank=rank, name="e.root"))
    expect_error_everywhere(lambda: hvd.broadcast(torch.ones(3, rank + 1), 0, name="e.bshape"))
    expect_error_everywhere(lambda: hvd.allgather(torch.ones(2, rank + 1), name="e.gshape"))
    try:
        hvd.allreduce(torch.ones(3, dtype=dt), name="e.msg")
    except hvd.HorovodInternalError as e:
        assert "Mismatched data types" in str(e)


def test_duplicate_name_is_value_error():
    # Each rank in turn submits first and retries the name while the others have not submitted
    # yet, so the first operation is certainly still in flight; then the others join in.
    x = torch.ones(4)
    for turn in range(hvd.size()):
        name = "dup.%d" % turn
        if hvd.rank() == turn:
            h = hvd.allreduce_async(x, name=name)
            with pytest.raises(ValueError, match="same name"):
                hvd.allreduce_async(x, name=name)
            hb = hvd.broadcast_async(x, 0, name=name + ".b")
            with pytest.raises(ValueError):
                hvd.broadcast_async(x, 0, name=name + ".b")
            hvd.barrier()
        else:
            hvd.barrier()
            h = hvd.allreduce_async(x, name=name)
            hb = hvd.broadcast_async(x, 0, name=name + ".b")
        hvd.synchronize(h)
        hvd.synchronize(hb)


def test_unsupported_inputs():
    with pytest.raises(NotImplementedError, match="only CPU and CUDA tensors"):
        hvd.allreduce(torch.ones(2, device="meta"))
    with pytest.raises(ValueError, match="not supported"):
        hvd.allreduce(torch.ones(2, dtype=torch.complex64))
    if torch.cuda.is_available() and not hvd.cuda_built():
        with pytest.raises(NotImplementedError, match="no device library"):
            hvd.allreduce(torch.ones(2, device="cuda"))
