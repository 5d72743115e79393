"""Adasum (op=hvd.Adasum): the allreduce against a numpy reference of the paper's formula over
the same combination tree, and the delta optimizer Horovod builds on it."""
import numpy as np
import pytest
import torch

import hvdsparse.torch as hvd


def _combine(a, b):
    """Adasum of two gradients (Maleki et al.): orthogonal ones add, parallel ones average."""
    dot, aa, bb = float(a @ b), float(a @ a), float(b @ b)
    tiny = np.sqrt(np.finfo(np.float64).tiny)
    ca = 1 - dot / (2 * aa) if aa >= tiny else 1.0
    cb = 1 - dot / (2 * bb) if bb >= tiny else 1.0
    return ca * a + cb * b


def _reference(grads):
    """The tree the runtime follows: ranks past the largest power of two fold into rank - P2,
    then pairs at distance 1, 2, 4, .."""
    v = [g.astype(np.float64) for g in grads]
    p2 = 1
    while p2 * 2 <= len(v):
        p2 *= 2
    for r in range(p2, len(v)):
        v[r - p2] = _combine(v[r - p2], v[r])
    level = 1
    while level < p2:
        for n in range(0, p2, 2 * level):
            v[n] = _combine(v[n], v[n + level])
        level *= 2
    return v[0]


def _grads(seed, n, size):
    rng = np.random.default_rng(seed)
    return [rng.normal(0.3 * (r % 2), 1.0, n) for r in range(size)]


@pytest.mark.parametrize("dtype,rtol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_allreduce_matches_the_numpy_reference(dtype, rtol):
    for seed, n in ((1, 1), (2, 7), (3, 1000)):
        grads = _grads(seed, n, hvd.size())
        mine = torch.tensor(grads[hvd.rank()], dtype=dtype)
        got = hvd.allreduce(mine, op=hvd.Adasum, name="adasum.ref.%d" % seed)
        want = _reference([g.astype(np.float32) if dtype == torch.float32 else g for g in grads])
        err = np.max(np.abs(got.double().numpy() - want)) / np.max(np.abs(want))
        assert err < rtol, "max relative error %g" % err


def test_fused_tensors_are_combined_each_on_its_own():
    grads = [_grads(10 + k, 5 + k, hvd.size()) for k in range(4)]
    handles = [hvd.allreduce_async(torch.tensor(g[hvd.rank()]), op=hvd.Adasum,
                                   name="adasum.fused.%d" % k) for k, g in enumerate(grads)]
    for h, g in zip(handles, grads):
        np.testing.assert_allclose(hvd.synchronize(h).numpy(), _reference(g), rtol=1e-12)


def test_orthogonal_gradients_add_and_parallel_ones_average():
    n, size, r = 12, hvd.size(), hvd.rank()
    mine = np.zeros(n)
    mine[r::size] = 1.0 + r
    got = hvd.allreduce(torch.tensor(mine), op=hvd.Adasum, name="adasum.orth")
    want = np.zeros(n)
    for q in range(size):
        want[q::size] = 1.0 + q
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    same = torch.linspace(-1, 1, n, dtype=torch.float64)
    np.testing.assert_allclose(hvd.allreduce(same, op=hvd.Adasum, name="adasum.par").numpy(),
                               same.numpy(), rtol=1e-12)


def test_delta_optimizer_combines_the_ranks_updates():
    """op=Adasum steps each rank's optimizer on its own gradient and combines the updates:
    with SGD the update is -lr g, so the parameter moves by Adasum(-lr g_r)."""
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.zeros(6, dtype=torch.float64))
    opt = hvd.DistributedOptimizer(torch.optim.SGD([w], lr=0.5), named_parameters=[("w", w)],
                                   op=hvd.Adasum)
    grads = _grads(42, 6, hvd.size())
    target = torch.tensor(grads[hvd.rank()])
    (w * target).sum().backward()  # gradient: this rank's vector
    opt.step()
    np.testing.assert_allclose(w.detach().numpy(), _reference([-0.5 * g for g in grads]),
                               rtol=1e-12)


def test_a_short_training_run_converges():
    """Least squares on data split across ranks, Adasum over SGD updates."""
    rng = np.random.default_rng(7 + hvd.rank())
    true_w = np.linspace(-1, 1, 8)
    x = torch.tensor(rng.normal(size=(64, 8)))
    y = x @ torch.tensor(true_w)
    model = torch.nn.Linear(8, 1, bias=False).double()
    torch.nn.init.zeros_(model.weight)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05),
                                   named_parameters=model.named_parameters(), op=hvd.Adasum)
    losses = []
    for _ in range(60):
        opt.zero_grad()
        loss = ((model(x).squeeze(1) - y) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(float(hvd.allreduce(loss.detach(), name="adasum.loss")))
    assert losses[-1] < 1e-3 * losses[0], losses[::10]
    w = model.weight.detach().clone()
    np.testing.assert_array_equal(hvd.allgather(w).numpy(), np.tile(w.numpy(), (hvd.size(), 1)))
