"""Sparse allreduce of torch sparse tensors and sparse gradients in DistributedOptimizer.

Every rank builds every rank's input from the same seeds, so each test checks the result against
a dense reference computed locally: the sum (or mean) of the ranks' dense tensors."""
import copy

import pytest
import torch
import torch.nn.functional as F

import hvdsparse.torch as hvd
from hvdsparse.torch import sparse_ops

ALGORITHMS = ["dense", "allgather", "ssar_recursive_doubling", "ssar_split_allgather",
              "dsar_split_allgather", "zen"]

# name: (shape, sparse_dim); the last dimensions of shape are dense.
LAYOUTS = {"coo_1d": ([40], 1), "coo_2d": ([6, 7], 2), "rows": ([30, 4], 1),
           "rows_2sparse": ([5, 6, 3], 2)}


def rank_input(r, shape, sparse_dim, nnz, seed, dtype=torch.float32):
    """Rank r's sparse tensor: unsorted, uncoalesced (a third of its entries repeated), small
    integer values (exact sums in every dtype); nnz == 0 gives an empty tensor."""
    g = torch.Generator().manual_seed(seed * 1009 + r)
    idx = torch.stack([torch.randint(0, d, (nnz,), generator=g) for d in shape[:sparse_dim]])
    idx = torch.cat([idx, idx[:, :nnz // 3]], 1)
    vals = torch.randint(-4, 5, (idx.shape[1],) + tuple(shape[sparse_dim:]), generator=g)
    return torch.sparse_coo_tensor(idx, vals.to(dtype), shape)


def reference(inputs, op):
    dense = sum(t.to_dense().double() for t in inputs)
    return dense / len(inputs) if op == hvd.Average else dense


def check_result(out, inputs, op, shape, sparse_dim):
    assert out.is_sparse and out.is_coalesced()
    assert list(out.shape) == list(shape) and out.sparse_dim() == sparse_dim
    assert out.dtype == inputs[0].dtype
    flat = out._indices()
    if flat.shape[1] > 1:  # sorted unique (row-major)
        keys = sum(flat[i] * int(torch.tensor(shape[i + 1:sparse_dim]).prod())
                   for i in range(sparse_dim))
        assert bool((keys[1:] > keys[:-1]).all())
    torch.testing.assert_close(out.to_dense().double(), reference(inputs, op), rtol=1e-6,
                               atol=1e-6)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("empty_rank", [False, True])
def test_sparse_allreduce_matches_dense(layout, op, index_dtype, empty_rank):
    shape, k = LAYOUTS[layout]
    n, r = hvd.size(), hvd.rank()
    nnz = [0 if (empty_rank and q == n - 1) else 5 + 2 * q for q in range(n)]
    inputs = [rank_input(q, shape, k, nnz[q], seed=len(layout)) for q in range(n)]
    out = hvd.sparse_allreduce(inputs[r], name="sp.%s.%d.%s.%d" % (layout, op, index_dtype,
                                                                   empty_rank),
                               op=op, index_dtype=index_dtype)
    check_result(out, inputs, op, shape, k)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("layout", ["coo_2d", "rows"])
@pytest.mark.parametrize("density", ["sparse", "full"])
def test_sparse_forced_algorithm(algorithm, layout, density):
    shape, k = LAYOUTS[layout]
    n, r = hvd.size(), hvd.rank()
    nnz = 4 if density == "sparse" else 4 * shape[0] * shape[1]  # "full": dense result
    inputs = [rank_input(q, shape, k, nnz, seed=7) for q in range(n)]
    handle = hvd.sparse_allreduce_async(inputs[r], op=hvd.Sum, algorithm=algorithm)
    out = hvd.synchronize(handle)
    assert handle.algorithm == algorithm
    check_result(out, inputs, hvd.Sum, shape, k)


def test_sparse_auto_float64_and_prescale():
    shape, k = LAYOUTS["rows"]
    n, r = hvd.size(), hvd.rank()
    inputs = [rank_input(q, shape, k, 6, seed=3, dtype=torch.float64) for q in range(n)]
    out = hvd.sparse_allreduce(inputs[r], algorithm="auto", postscale_factor=0.5)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out.to_dense(), reference(inputs, hvd.Average) * 0.5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int32, torch.int64])
def test_sparse_value_dtypes(dtype):
    shape, k = LAYOUTS["rows"]
    n, r = hvd.size(), hvd.rank()
    inputs = [rank_input(q, shape, k, 5, seed=4, dtype=dtype) for q in range(n)]
    out = hvd.sparse_allreduce(inputs[r], op=hvd.Sum)
    check_result(out, inputs, hvd.Sum, shape, k)


def test_sparse_empty_on_every_rank():
    shape, k = LAYOUTS["rows"]
    t = rank_input(hvd.rank(), shape, k, 0, seed=1)
    out = hvd.sparse_allreduce(t, op=hvd.Sum)
    assert out._nnz() == 0 and list(out.shape) == shape and out.is_coalesced()


def test_sparse_int64_index_range():
    """A COO tensor of 2^32 elements needs int64 indices on the wire."""
    shape = [1 << 16, 1 << 16]
    n, r = hvd.size(), hvd.rank()
    inputs = [torch.sparse_coo_tensor(torch.tensor([[shape[0] - 1, q, 0], [shape[1] - 1 - q, 5, 0]]),
                                      torch.tensor([1.0, 2.0, float(q)]), shape)
              for q in range(n)]
    out = hvd.sparse_allreduce(inputs[r], op=hvd.Sum)
    expected = {}
    for t in inputs:
        for (i, j), v in zip(t._indices().t().tolist(), t._values().tolist()):
            expected[(i, j)] = expected.get((i, j), 0.0) + v
    got = {tuple(ij): v for ij, v in zip(out._indices().t().tolist(), out._values().tolist())}
    assert got == expected
    with pytest.raises(ValueError):
        hvd.sparse_allreduce(inputs[r], index_dtype=torch.int32)


def test_sparse_horovod_positional_form_and_poll():
    n, r = hvd.size(), hvd.rank()
    s = torch.sparse_coo_tensor(torch.tensor([[r, 0]]), torch.tensor([1.0, 2.0]), (n,))
    handle = hvd.sparse_allreduce_async(s, "sp.positional", hvd.Sum)
    while not hvd.poll(handle):
        pass
    out = handle().to_dense()
    expected = torch.ones(n)
    expected[0] += 2.0 * n
    assert torch.equal(out, expected)
    assert torch.equal(handle().to_dense(), expected)  # the same result again


@pytest.mark.parametrize("layout", ["rows", "coo_2d"])
def test_sparse_out_of_range_fails_every_rank(layout):
    shape, k = LAYOUTS[layout]
    n, r = hvd.size(), hvd.rank()
    bad = n - 1
    t = rank_input(r, shape, k, 4, seed=11)
    if r == bad:  # the last entry's first index is outside its dimension
        idx = t._indices().clone()
        idx[0, -1] = 1000
        t = torch.sparse_coo_tensor(idx, t._values(), shape, check_invariants=False)
    with pytest.raises((ValueError, hvd.HorovodInternalError)) as info:
        hvd.sparse_allreduce(t, name="sp.bad.%s" % layout)
    msg = str(info.value)
    flat = 1000 if k == 1 else -1  # multi-dimensional indices are sent as -1 when invalid
    assert str(flat) in msg, msg
    if r == bad and k > 1:
        assert "1000" in msg, msg  # this rank's message names the torch index too
    # the runtime is still usable
    s = torch.sparse_coo_tensor(torch.tensor([[0]]), torch.tensor([1.0]), (2,))
    assert hvd.sparse_allreduce(s, op=hvd.Sum).to_dense()[0].item() == n


# What a CUDA sparse tensor runs on the NCCL route (sparse_ops._allgather_on_device_async:
# every rank's entries gathered where they are and coalesced there), run here on CPU tensors.
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average])
def test_sparse_device_allgather_matches_dense(layout, op):
    shape, k = LAYOUTS[layout]
    n, r = hvd.size(), hvd.rank()
    nnz = [0 if q == n - 1 else 5 + 2 * q for q in range(n)]  # the last rank sends nothing
    inputs = [rank_input(q, shape, k, nnz[q], seed=20 + len(layout)) for q in range(n)]
    handle = sparse_ops._allgather_on_device_async(
        inputs[r], "sp.dev.%s.%d" % (layout, op), op, hvd.global_process_set, None, 1.0, 1.0)
    out = hvd.synchronize(handle)
    assert handle.algorithm == "allgather"
    check_result(out, inputs, op, shape, k)
    scaled = hvd.synchronize(sparse_ops._allgather_on_device_async(
        inputs[r], "sp.dev.scaled.%s.%d" % (layout, op), op, hvd.global_process_set,
        torch.int64, 2.0, 0.25))
    torch.testing.assert_close(scaled.to_dense().double(), reference(inputs, op) * 0.5)


def test_sparse_device_allgather_out_of_range_fails_every_rank():
    shape, k = LAYOUTS["rows"]
    n, r = hvd.size(), hvd.rank()
    t = rank_input(r, shape, k, 4, seed=12)
    if r == n - 1:
        idx = t._indices().clone()
        idx[0, 1] = 1000
        t = torch.sparse_coo_tensor(idx, t._values(), shape, check_invariants=False)
    with pytest.raises(ValueError, match="'sp.dev.bad': a rank sent an index outside the "
                                         "tensor's 30 rows") as info:
        hvd.synchronize(sparse_ops._allgather_on_device_async(
            t, "sp.dev.bad", hvd.Sum, hvd.global_process_set, None, 1.0, 1.0))
    if r == n - 1:
        assert "this rank's entry 1 has index 1000" in str(info.value)


def test_sparse_device_allgather_beside_the_runtimes_path_fails_every_rank():
    """A rank gathering on its GPU where another took the runtime's sparse path (a CPU tensor
    there) under the same name: a mismatch naming both, not a wait."""
    t = torch.sparse_coo_tensor([[hvd.rank()]], [1.0], (4,))
    with pytest.raises(hvd.HorovodInternalError,
                       match="SPARSE_ALLREDUCE, but another rank did an ALLGATHER.*"
                             "sparse_allreduce.sp.dev.mixed"):
        if hvd.rank() == 0:
            hvd.sparse_allreduce(t, name="sp.dev.mixed", op=hvd.Sum)
        else:
            hvd.synchronize(sparse_ops._allgather_on_device_async(
                t, "sp.dev.mixed", hvd.Sum, hvd.global_process_set, None, 1.0, 1.0))


def test_sparse_argument_errors():
    s = torch.sparse_coo_tensor(torch.tensor([[0]]), torch.tensor([1.0]), (2,))
    with pytest.raises(NotImplementedError):
        hvd.sparse_allreduce(s, op=hvd.Max)
    with pytest.raises(ValueError):
        hvd.sparse_allreduce(s, algorithm="ring")
    with pytest.raises(ValueError):
        hvd.sparse_allreduce(torch.ones(2))


# ---- DistributedOptimizer ---------------------------------------------------------------------
VOCAB, DIM = 500, 8


class EmbModel(torch.nn.Module):
    def __init__(self, sparse):
        super().__init__()
        torch.manual_seed(0)
        self.emb = torch.nn.Embedding(VOCAB, DIM, sparse=sparse)
        self.out = torch.nn.Linear(DIM, 1)

    def forward(self, ids):
        return self.out(self.emb(ids).mean(1)).squeeze(1)


def zipf_batches(steps, per_rank, bag=6):
    """Every rank's batches: Zipf-like ids (many repeats), from one seed."""
    g = torch.Generator().manual_seed(99)
    out = []
    for _ in range(steps):
        u = torch.rand(hvd.size() * per_rank, bag, generator=g)
        ids = (VOCAB * u ** 3).long().clamp(max=VOCAB - 1)
        y = torch.randn(hvd.size() * per_rank, generator=g)
        out.append((ids, y))
    return out


def train(sparse, steps=4, momentum=0.0, skip=None, **opt_kwargs):
    """skip=(step, rank): that rank does not use the embedding in that step."""
    model = EmbModel(sparse)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.5,
                                                   momentum=momentum),
                                   named_parameters=model.named_parameters(), **opt_kwargs)
    per_rank, r = 4, hvd.rank()
    for step, (ids, y) in enumerate(zipf_batches(steps, per_rank)):
        opt.zero_grad()
        mine = slice(r * per_rank, (r + 1) * per_rank)
        if skip == (step, r):
            pred = model.out(torch.zeros(per_rank, DIM)).squeeze(1)
        else:
            pred = model(ids[mine])
        F.mse_loss(pred, y[mine]).backward()
        opt.step()
    return model


def max_diff(a, b):
    return max((p.detach() - q.detach()).abs().max().item()
               for p, q in zip(a.parameters(), b.parameters()))


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_optimizer_sparse_embedding_matches_dense(momentum):
    dense = train(sparse=False, momentum=momentum)
    for kwargs in ({}, {"sparse_algorithm": "zen"}, {"sparse_algorithm": "allgather"},
                   {"sparse_as_dense": True}):
        model = train(sparse=True, momentum=momentum, **kwargs)
        diff = max_diff(model, dense)
        print("sparse embedding %s momentum=%g np=%d: max |diff| = %.3g"
              % (kwargs, momentum, hvd.size(), diff))
        assert diff < 1e-5, kwargs


def test_optimizer_dense_gradients_opt_in():
    dense = train(sparse=False)
    for kwargs in ({"sparse_params": ["emb.weight"]}, {"sparse_detect": True},
                   {"sparse_detect": True, "sparse_algorithm": "ssar_split_allgather"}):
        diff = max_diff(train(sparse=False, **kwargs), dense)
        assert diff < 1e-5, (kwargs, diff)
    with pytest.raises(ValueError):
        train(sparse=False, sparse_params=["no.such.param"])


def test_optimizer_sparse_embedding_unused_on_one_rank():
    """After a step with a sparse gradient, a rank that does not use the embedding sends an
    empty sparse gradient, so every rank still takes the sparse path."""
    skip = (2, hvd.size() - 1)
    diff = max_diff(train(sparse=True, skip=skip), train(sparse=False, skip=skip))
    assert diff < 1e-5


def test_optimizer_sparse_gradients_are_sparse():
    model = EmbModel(sparse=True)
    ref = copy.deepcopy(model)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    ids = torch.tensor([[hvd.rank(), 3, 3]])
    model(ids).sum().backward()
    opt.synchronize()
    g = model.emb.weight.grad
    assert g.is_sparse and g.is_coalesced()
    assert g._indices()[0].tolist() == sorted({q for q in range(hvd.size())} | {3})
    with opt.skip_synchronize():
        opt.step()
    assert max_diff(model, ref) > 0
