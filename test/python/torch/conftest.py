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
