"""Gradients of the differentiable collectives, as Horovod defines them."""
import pytest
import torch

import hvdsparse.torch as hvd

DTYPES = [torch.float32, torch.float64]


@pytest.mark.parametrize("dtype", DTYPES)
def test_allreduce_grad(dtype):
    size = hvd.size()
    for op, factor in ((hvd.Sum, size), (hvd.Average, 1)):
        for dim in (1, 2, 3):
            x = torch.rand([5] * dim, dtype=dtype, requires_grad=True)
            hvd.allreduce(x, op=op).backward(torch.ones([5] * dim, dtype=dtype))
            assert torch.allclose(x.grad, torch.ones_like(x) * factor)


def test_grouped_allreduce_grad():
    size = hvd.size()
    xs = [torch.rand(3, requires_grad=True) for _ in range(3)]
    outs = hvd.grouped_allreduce(xs, op=hvd.Sum)
    torch.stack(outs).sum().backward()
    for x in xs:
        assert torch.allclose(x.grad, torch.full((3,), float(size)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_allgather_grad(dtype):
    size, rank = hvd.size(), hvd.rank()
    sizes = [3, 2, 7, 4, 6][:size]
    for dim in (1, 2, 3):
        x = torch.rand([sizes[rank]] + [4] * (dim - 1), dtype=dtype, requires_grad=True)
        g = hvd.allgather(x)
        grad_ys = torch.cat([torch.ones([s] + [4] * (dim - 1), dtype=dtype) * r
                             for r, s in enumerate(sizes)])
        g.backward(grad_ys)
        assert torch.allclose(x.grad, torch.ones_like(x) * rank)


def test_grouped_allgather_grad():
    rank = hvd.rank()
    xs = [torch.rand(2, 3, requires_grad=True), torch.rand(rank + 1, requires_grad=True)]
    outs = hvd.grouped_allgather(xs)
    (outs[0].sum() + outs[1].sum()).backward()
    assert torch.allclose(xs[0].grad, torch.ones(2, 3))
    assert torch.allclose(xs[1].grad, torch.ones(rank + 1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_broadcast_grad_is_the_average_on_the_root(dtype):
    """Horovod's definition: the gradient averaged over the set on the root, zero elsewhere."""
    size, rank = hvd.size(), hvd.rank()
    for root in range(size):
        x = (torch.ones(4, 4, dtype=dtype) * rank).requires_grad_()
        hvd.broadcast(x, root).backward(torch.ones(4, 4, dtype=dtype) * (rank + 1))
        expected = (size + 1) / 2 if rank == root else 0
        assert torch.allclose(x.grad, torch.full((4, 4), float(expected), dtype=dtype))


def test_alltoall_grad():
    size, rank = hvd.size(), hvd.rank()
    splits = [rank + 1] * size
    x = torch.rand(sum(splits), 3, requires_grad=True)
    out, received = hvd.alltoall(x, splits=splits)
    out.backward(torch.ones_like(out))
    assert torch.allclose(x.grad, torch.ones_like(x))
    y = torch.rand(2 * size, requires_grad=True)
    hvd.alltoall(y).backward(torch.ones(2 * size) * 2)
    assert torch.allclose(y.grad, torch.full((2 * size,), 2.0))


@pytest.mark.parametrize("dtype", DTYPES)
def test_reducescatter_grad(dtype):
    size = hvd.size()
    for op, factor in ((hvd.Sum, size), (hvd.Average, 1)):
        x = torch.rand(size * 4, 3, dtype=dtype, requires_grad=True)
        out = hvd.reducescatter(x, op=op)
        out.backward(torch.ones_like(out))
        assert torch.allclose(x.grad, torch.full((size * 4, 3), float(factor), dtype=dtype))
