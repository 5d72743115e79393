"""Shared setup: every rank runs the same tests in the same order under `hvdsparse run`.

The runtime is initialised once per test (idempotent, with dynamic process sets) and left
running between tests; test_basics.py checks shutdown and re-initialisation explicitly."""
import os

import pytest

os.environ.setdefault("HOROVOD_DYNAMIC_PROCESS_SETS", "1")
os.environ.setdefault("HOROVOD_TIMELINE", "DYNAMIC")

import hvdsparse.torch as hvd  # noqa: E402


@pytest.fixture(autouse=True)
def hvd_init():
    hvd.init()
    yield
    if hvd.is_initialized():
        hvd.barrier()


def rank_values(r, shape, dtype):
    """Rank r's input: small non-negative integers, exact in every dtype and op."""
    import torch
    n = 1
    for d in shape:
        n *= d
    base = (torch.arange(n, dtype=torch.int64) + r) % 3 + (1 if r == 0 else 0)
    return base.reshape(shape).to(dtype)


def rank_pairs(r, n, k, seed=500):
    """Rank r's k top-k (index, value) pairs over n elements: distinct indices, integer values
    of both signs, and on odd ranks the GPU selection's padding (index 0, value 0) in the last
    two slots."""
    import torch
    g = torch.Generator().manual_seed(seed + r)
    idx = torch.randperm(n, generator=g)[:k].sort().values.to(torch.int32)
    vals = (torch.randint(1, 50, (k,), generator=g) * (1 - 2 * (idx % 2))).double()
    if r % 2 and k >= 2:
        idx[-2:] = 0
        vals[-2:] = 0
    return idx, vals


def pairs_sum(n, ks, op, prescale, postscale, seed=500):
    """The dense sparse allreduce of every rank r's rank_pairs(r, n, ks[r], seed), computed here
    (float64)."""
    import torch
    want = torch.zeros(n, dtype=torch.float64)
    for r, k in enumerate(ks):
        i, v = rank_pairs(r, n, k, seed)
        want.index_add_(0, i.long(), v)
    return want * prescale / (len(ks) if op == hvd.Average else 1) * postscale


def same_bits_everywhere(t, name):
    """True when every rank holds the same bits in t (gathered under name)."""
    every = hvd.allgather(t.reshape(1, -1), name=name)
    return bool((every == every[0]).all())


def clash_with_the_runtimes_path(name, algorithm, start_on_route):
    """Rank 0 takes the runtime's sparse path with algorithm under name, the others the GPU
    route's start_on_route(vals, idx, out, name): negotiation fails on every rank (an alltoall
    against a sparse allreduce), naming the tensor, and nobody waits."""
    import torch
    from hvdsparse.torch.topk import allreduce_into_async
    idx, vals = rank_pairs(hvd.rank(), 30, 4)
    out = torch.zeros(30, dtype=torch.float64)
    with pytest.raises(hvd.HorovodInternalError, match="sparse_allreduce." + name):
        if hvd.rank() == 0:
            sent = vals != 0
            hvd.synchronize(allreduce_into_async(vals[sent], idx[sent], out, name, hvd.Sum,
                                                 1.0, 1.0, hvd.global_process_set, algorithm))
        else:
            hvd.synchronize(start_on_route(vals, idx, out, name))
