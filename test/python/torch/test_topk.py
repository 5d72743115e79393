"""Compression.topk: selection against a sort, error feedback, the residual as optimizer state,
training through DistributedOptimizer against a single-process reference that runs every rank's
top-k with error feedback and averages, and quantize_bits; plus the numpy quantization reference.

Every rank builds every rank's data from the same seeds, so the reference is computed locally."""
import copy
import io
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import hvdsparse.torch as hvd
from hvdsparse.common import quantize as qref
from hvdsparse.torch.gpu_sparse import dense_allgather
from hvdsparse.torch.topk import TopKCompressor, quant_bits_supported

from conftest import rank_pairs


def sort_topk(flat, k):
    """Indices of the k largest magnitudes, by a full sort."""
    return torch.argsort(flat.abs(), descending=True, stable=True)[:k]


def distinct(n, seed):
    """n values of distinct magnitudes in random order."""
    g = torch.Generator().manual_seed(seed)
    mags = (torch.arange(n, dtype=torch.float64) + 1) / n
    signs = torch.randint(0, 2, (n,), generator=g) * 2 - 1
    return (mags * signs)[torch.randperm(n, generator=g)].float()


# ---- selection ---------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 5, 100, 1000, 65535])
@pytest.mark.parametrize("ratio", [0.001, 0.01, 0.1, 0.5, 1.0])
def test_exact_topk_matches_sort(n, ratio):
    x = distinct(n, n)
    comp = TopKCompressor(ratio, sampled_above=None)
    k = comp.k(n)
    assert k == min(n, max(1, math.ceil(ratio * n)))
    values, idx = comp.select(x)
    assert idx.numel() == k
    assert sorted(idx.tolist()) == sorted(sort_topk(x, k).tolist())
    assert torch.equal(values, x[idx])


@pytest.mark.parametrize("ratio", [0.001, 0.01, 0.05])
def test_sampled_threshold_selects_the_exact_topk(ratio):
    n = 1 << 18
    comp = TopKCompressor(ratio)  # sampled above 65536 elements
    assert comp.sampled(n)
    for seed in range(3):
        x = distinct(n, seed)
        values, idx = comp.select(x)
        k = comp.k(n)
        assert idx.numel() == k
        assert sorted(idx.tolist()) == sorted(sort_topk(x, k).tolist())
        assert torch.equal(values, x[idx])
    assert comp.fallbacks == 0  # the oversampled threshold held the top k every time


def test_sampled_threshold_falls_back_and_keeps_the_count():
    n = 1 << 17
    comp = TopKCompressor(0.01, oversample=1.0, sample_ratio=0.01, margin=0)  # at the k-th
    for seed in range(12):
        x = distinct(n, 100 + seed)
        _, idx = comp.select(x)
        assert sorted(idx.tolist()) == sorted(sort_topk(x, comp.k(n)).tolist())
    assert comp.fallbacks > 0
    ties = torch.ones(n)  # every magnitude equal: any k of them, exactly k
    _, idx = TopKCompressor(0.01).select(ties)
    assert idx.numel() == TopKCompressor(0.01).k(n) and idx.unique().numel() == idx.numel()


def test_compressor_options_are_checked():
    for bad in (0, -0.1, 1.5, "0.1"):
        with pytest.raises(ValueError):
            hvd.Compression.topk(bad)
    with pytest.raises(ValueError):
        hvd.Compression.topk(0.1, oversample=0.5)
    with pytest.raises(ValueError):
        hvd.Compression.topk(0.1, margin=-1)
    comp = hvd.Compression.topk(0.1, min_numel=10)
    assert not comp.applies(9) and comp.applies(10) and not comp.applies(0)
    coo, ctx = comp.compress(torch.arange(20.0).reshape(4, 5))
    assert coo.is_sparse and coo.shape == (20,) and coo._nnz() == 2
    assert torch.equal(comp.decompress(coo, ctx),
                       torch.tensor([0.0] * 18 + [18.0, 19.0]).reshape(4, 5))


# ---- error feedback ----------------------------------------------------------------------------
def test_error_feedback_tracks_the_gradient_sum():
    """sent + residual == sum of gradients at every step (nothing is lost), and the residual stays
    within the error-feedback bound sqrt(4 (1 - d)) / d * max |g| (d = k / n)."""
    n, ratio = 1000, 0.05
    comp = TopKCompressor(ratio)
    residual = torch.zeros(n, dtype=torch.float64)
    sent, total = torch.zeros(n, dtype=torch.float64), torch.zeros(n, dtype=torch.float64)
    g = torch.Generator().manual_seed(5)
    d = comp.k(n) / n
    bound, worst = 0.0, 0.0
    for _ in range(400):
        grad = torch.randn(n, generator=g, dtype=torch.float64)
        total += grad
        values, idx = comp.feedback(grad, residual)
        assert idx.numel() == comp.k(n)
        sent.index_add_(0, idx, values)
        torch.testing.assert_close(sent + residual, total, rtol=0, atol=1e-9)
        bound = max(bound, math.sqrt(4 * (1 - d)) / d * grad.norm().item())
        worst = max(worst, residual.norm().item())
    assert worst < bound
    # Every coordinate got its share: nothing stays stuck in the residual forever.
    assert bool((sent != 0).all())


# ---- DistributedOptimizer ----------------------------------------------------------------------
def _model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))


def _batch(rank, step):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(6, 8, generator=g), torch.randn(6, 4, generator=g)


def _loss(model, rank, step):
    x, y = _batch(rank, step)
    return F.mse_loss(model(x), y)


def _dist_opt(model, comp, lr=0.05, momentum=0.0, **kw):
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    return hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(),
                                    compression=comp, **kw)


def _train(model, opt, steps, first=0):
    for s in range(first, first + steps):
        opt.zero_grad()
        _loss(model, hvd.rank(), s).backward()
        opt.step()


def _reference(steps, ratio, min_numel=0, momentum=0.0, op=hvd.Average):
    """Every rank's top-k with error feedback on its own gradient, at the shared parameters; the
    dense average (or sum) applied with SGD."""
    n = hvd.size()
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=momentum)
    comps = [TopKCompressor(ratio, min_numel=min_numel) for _ in range(n)]
    residuals = [{name: torch.zeros_like(p) for name, p in model.named_parameters()}
                 for _ in range(n)]
    for s in range(steps):
        acc = {name: torch.zeros_like(p) for name, p in model.named_parameters()}
        for q in range(n):
            model.zero_grad()
            _loss(model, q, s).backward()
            for name, p in model.named_parameters():
                if comps[q].applies(p.numel()):
                    values, idx = comps[q].feedback(p.grad, residuals[q][name])
                    acc[name].view(-1).index_add_(0, idx, values)
                else:
                    acc[name] += p.grad
        for name, p in model.named_parameters():
            p.grad = acc[name] / n if op == hvd.Average else acc[name]
        opt.step()
    return model


@pytest.mark.parametrize("ratio,min_numel", [(0.1, 0), (0.25, 20), (1.0, 0)])
@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_training_matches_the_single_process_reference(ratio, min_numel, momentum):
    model = _model()
    opt = _dist_opt(model, hvd.Compression.topk(ratio, min_numel=min_numel), momentum=momentum)
    _train(model, opt, 15)
    ref = _reference(15, ratio, min_numel, momentum)
    for (name, a), b in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=name)
    # Every rank holds the same parameters.
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    gathered = hvd.allgather(flat.unsqueeze(0), name="topk.params.%g.%d.%g"
                             % (ratio, min_numel, momentum))
    assert bool((gathered == gathered[0]).all())


def test_training_op_sum_and_sparse_algorithms():
    for algorithm in ("ssar_split_allgather", "dsar_split_allgather", "zen", "dense"):
        model = _model()
        opt = _dist_opt(model, hvd.Compression.topk(0.2), op=hvd.Sum,
                        sparse_algorithm=algorithm)
        _train(model, opt, 4)
        ref = _reference(4, 0.2, op=hvd.Sum)
        for a, b in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=algorithm)


def test_update_tracks_the_true_average_gradient():
    """Over many steps with a fixed learning rate, the parameters' total movement under top-k
    with error feedback stays close to that of dense training's summed gradient."""
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.zeros(500))
    opt = hvd.DistributedOptimizer(torch.optim.SGD([w], lr=1.0),
                                   named_parameters=[("w", w)],
                                   compression=hvd.Compression.topk(0.02))
    total = torch.zeros(500)
    n = hvd.size()
    for s in range(200):
        grads = [torch.randn(500, generator=torch.Generator().manual_seed(7 * s + q))
                 for q in range(n)]
        total += sum(grads) / n
        opt.zero_grad()
        w.grad = grads[hvd.rank()].clone()  # no backward: step() starts the allreduce
        opt.step()
    # -w is the sum of the averaged sent values; the ranks' average residual is the rest.
    all_res = hvd.allgather(opt._topk_residuals[w].unsqueeze(0), name="topk.track.res")
    torch.testing.assert_close(-w.detach() + all_res.mean(0), total, rtol=0, atol=1e-3)
    assert all_res.norm(dim=1).max() < total.norm() * 5


def test_state_dict_round_trip_and_adam():
    model = _model()
    opt = hvd.DistributedOptimizer(torch.optim.Adam(model.parameters(), lr=1e-2),
                                   named_parameters=model.named_parameters(),
                                   compression=hvd.Compression.topk(0.1))
    _train(model, opt, 3)
    assert all("exp_avg" in opt.state[p] for p in model.parameters())  # Adam initialised
    sd = opt.state_dict()
    res = sd["hvdsparse"]["topk_residual"]
    assert sorted(res) == list(range(4))
    assert any(r.abs().sum() > 0 for r in res.values())
    buf = io.BytesIO()
    torch.save(sd, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)

    model2 = copy.deepcopy(model)
    opt2 = hvd.DistributedOptimizer(torch.optim.Adam(model2.parameters(), lr=1e-2),
                                    named_parameters=model2.named_parameters(),
                                    compression=hvd.Compression.topk(0.1))
    opt2.load_state_dict(loaded)
    for p, p2 in zip(model.parameters(), model2.parameters()):
        assert torch.equal(opt._topk_residuals[p], opt2._topk_residuals[p2])
    _train(model, opt, 2, first=3)
    _train(model2, opt2, 2, first=3)
    for p, p2 in zip(model.parameters(), model2.parameters()):
        assert torch.equal(p, p2)
    # A state dict without residuals (a plain optimizer's) resets them.
    opt2.load_state_dict(torch.optim.Adam(model2.parameters()).state_dict())
    assert not opt2._topk_residuals


def test_broadcast_optimizer_state_sends_root_residuals():
    model = _model()
    opt = _dist_opt(model, hvd.Compression.topk(0.1), momentum=0.9)
    _train(model, opt, 3)
    mine = torch.cat([r.reshape(-1) for r in opt._topk_residuals.values()])
    spread = hvd.allgather(mine.unsqueeze(0), name="topk.bcast.before")
    if hvd.size() > 1:
        assert not bool((spread == spread[0]).all())  # ranks' residuals differ
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    mine = torch.cat([r.reshape(-1) for r in opt._topk_residuals.values()])
    spread = hvd.allgather(mine.unsqueeze(0), name="topk.bcast.after")
    assert bool((spread == spread[0]).all())
    # A fresh optimizer (no residuals yet) takes part too: zeros are created, root's arrive.
    model2 = _model()
    opt2 = _dist_opt(model2, hvd.Compression.topk(0.1), momentum=0.9)
    if hvd.rank() == 0:
        opt2.load_state_dict(opt.state_dict())
    hvd.broadcast_optimizer_state(opt2, root_rank=0)
    for p, p2 in zip(model.parameters(), model2.parameters()):
        assert torch.equal(opt._topk_residuals[p], opt2._topk_residuals[p2])


def test_topk_with_sparse_gradients_and_bad_combinations():
    emb = torch.nn.Embedding(20, 3, sparse=True)
    torch.manual_seed(1)
    emb.weight.data.normal_()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(emb.parameters(), lr=0.1),
                                   named_parameters=emb.named_parameters(),
                                   compression=hvd.Compression.topk(0.1))
    opt.zero_grad()
    emb(torch.tensor([hvd.rank(), 10])).sum().backward()
    opt.synchronize()
    g = emb.weight.grad
    assert g.is_sparse  # the sparse path, uncompressed
    expected = torch.zeros(20, 3)
    for q in range(hvd.size()):
        expected[q] += 1
        expected[10] += 1
    torch.testing.assert_close(g.to_dense(), expected / hvd.size())
    with opt.skip_synchronize():
        opt.step()
    model = _model()
    for kw in ({"groups": 1}, {"num_groups": 2}):
        with pytest.raises(ValueError, match="topk"):
            _dist_opt(model, hvd.Compression.topk(0.1), **kw)
    with pytest.raises(ValueError, match="topk"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 compression=hvd.Compression.topk(0.1), pipeline="dear",
                                 model=model)
    with pytest.raises(ValueError, match="quantize_bits"):
        _dist_opt(model, hvd.Compression.topk(0.1), quantize_bits=3)


@pytest.mark.parametrize("algorithm", ["dsar_split_allgather", "ssar_split_allgather", "zen"])
def test_quantize_bits(algorithm):
    model = _model()
    assert quant_bits_supported()
    opt = _dist_opt(model, hvd.Compression.topk(0.5), quantize_bits=4,
                    sparse_algorithm=algorithm)
    _train(model, opt, 5)
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    gathered = hvd.allgather(flat.unsqueeze(0), name="topk.quant.params")
    assert bool((gathered == gathered[0]).all())  # identical on every rank
    ref = _reference(5, 0.5)
    diff = max((a - b).abs().max().item() for a, b in zip(model.parameters(), ref.parameters()))
    assert 0 < diff < 0.1  # quantized (not exact), and close


# ---- the numpy quantization reference ----------------------------------------------------------
@pytest.mark.parametrize("bits", [2, 4, 8])
def test_quantize_reference_unbiased_bounded_exact_on_grid(bits):
    rng = np.random.RandomState(bits)
    x = (rng.randn(2500) * np.repeat([1.0, 5.0, 0.1], [1024, 1024, 452])).astype(np.float32)
    bound = qref.error_bound(x, bits)
    draws = np.stack([qref.quantize(x, bits, seed) for seed in range(400)])
    assert np.all(np.abs(draws - x) <= bound * (1 + 1e-6))
    step = bound
    np.testing.assert_array_less(np.abs(draws.mean(0) - x), 6 * step / (2 * np.sqrt(400)) + 1e-9)
    grid = draws[0]
    assert np.array_equal(qref.quantize(grid, bits, 12345), grid)
    assert qref.encoded_bytes(2500, bits) == len(qref.encode(x, bits, 1))


# ---- the GPU's sparse allreduce, run here on CPU tensors ---------------------------------------
# gpu_sparse.dense_allgather's dense and allgather algorithms are what a CUDA gradient runs on
# the NCCL route; they are device-agnostic, so these tests check their results on the CPU (the
# GPU's own run is in test/gpu/torch_gpu_checks.py).
def _rank_pairs(r, n, k):
    return rank_pairs(r, n, k, 300)


@pytest.mark.parametrize("algorithm", ["dense", "allgather", "auto"])
@pytest.mark.parametrize("op,prescale,postscale", [(hvd.Sum, 1.0, 1.0), (hvd.Average, 2.0, 0.5)])
def test_device_algorithms_equal_the_sum_of_every_ranks_pairs(algorithm, op, prescale, postscale):
    n, k = 40, 6
    want = torch.zeros(n, dtype=torch.float64)
    for r in range(hvd.size()):
        i, v = _rank_pairs(r, n, k)
        want.index_add_(0, i.long(), v)
    want = want * prescale / (hvd.size() if op == hvd.Average else 1) * postscale
    idx, vals = _rank_pairs(hvd.rank(), n, k)
    out = torch.full((5, 8), 99.0, dtype=torch.float64)  # stale values must not survive
    h = dense_allgather.topk_into_async(vals, idx, out, "dev.%s.%d" % (algorithm, op), op,
                                        prescale, postscale, hvd.global_process_set, algorithm)
    got = hvd.synchronize(h)
    assert got is out
    if op == hvd.Sum:  # integers: exact
        assert torch.equal(out.reshape(-1), want)
    else:  # the division by the size rounds where the scaling falls
        torch.testing.assert_close(out.reshape(-1), want, rtol=1e-15, atol=0)
    every = hvd.allgather(out.reshape(1, -1), name="dev.check.%s.%d" % (algorithm, op))
    assert bool((every == every[0]).all())  # every rank holds the same bits


def test_device_algorithm_choice_and_what_it_leaves_to_the_runtime():
    # 4 ranks, n = 1000 float32: a ring allreduce brings 6000 bytes to each rank, the allgather
    # 3 k pairs of 8 bytes, so the allgather wins below k = 250.
    assert dense_allgather.choose(1000, 249, 4, 4, 4) == "allgather"
    assert dense_allgather.choose(1000, 250, 4, 4, 4) == "dense"
    assert dense_allgather.choose(1000, 10, 1, 4, 4) == "allgather"
    assert dense_allgather.runs_here(None, hvd.Average, 0)
    assert dense_allgather.runs_here("allgather", hvd.Sum, 0)
    for algorithm in ("zen", "ssar_split_allgather", "dsar_split_allgather",
                      "ssar_recursive_doubling"):
        assert not dense_allgather.runs_here(algorithm, hvd.Average, 0)  # split.py's, or RD's
    assert not dense_allgather.runs_here(None, hvd.Average, 4)  # quantized values: the runtime's
    assert not dense_allgather.runs_here(None, hvd.Max, 0)


def test_device_allgather_refuses_ranks_that_sent_different_counts():
    k = 5 if hvd.rank() == 1 else 3  # no rank sees size * k in all
    idx = torch.arange(k, dtype=torch.int32)
    vals = torch.ones(k, dtype=torch.float64)
    out = torch.zeros(20, dtype=torch.float64)
    h = dense_allgather.topk_into_async(vals, idx, out, "dev.uneven", hvd.Sum, 1.0, 1.0,
                                        hvd.global_process_set, "allgather")
    with pytest.raises(ValueError, match="'dev.uneven'.*same size"):
        hvd.synchronize(h)
