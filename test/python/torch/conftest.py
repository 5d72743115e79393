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
