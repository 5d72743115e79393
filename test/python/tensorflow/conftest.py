"""Shared setup: every rank runs the same tests in the same order under `hvdsparse run`.

The runtime is initialised once per test (idempotent) and left running between tests."""
import os

import pytest

os.environ.setdefault("HOROVOD_DYNAMIC_PROCESS_SETS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")  # same arithmetic at every batch size

import tensorflow as tf  # noqa: E402

import hvdsparse.tensorflow as hvd  # noqa: E402

tf.config.threading.set_inter_op_parallelism_threads(2)
tf.config.threading.set_intra_op_parallelism_threads(1)


@pytest.fixture(autouse=True)
def hvd_init():
    hvd.init()
    yield
    if hvd.is_initialized():
        hvd.barrier()


@pytest.fixture(params=["eager", "graph"])
def mode(request):
    return request.param


def execute(mode, fn, *args):
    """fn(*args) eagerly, or traced by tf.function."""
    if mode == "eager":
        return fn(*args)
    return tf.function(fn)(*args)


def rank_values(r, shape, dtype):
    """Rank r's input: small non-negative integers, exact in every dtype and op."""
    n = 1
    for d in shape:
        n *= d
    base = (tf.range(n, dtype=tf.int64) + r) % 3 + (1 if r == 0 else 0)
    return tf.cast(tf.reshape(base, shape), dtype)
