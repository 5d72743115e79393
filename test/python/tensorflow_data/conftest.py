"""Every rank runs the same tests in the same order under `hvdsparse run`; the runtime is
initialised once (idempotent) and the ranks meet after each test."""
import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import hvdsparse.tensorflow as hvd  # noqa: E402


@pytest.fixture(autouse=True)
def hvd_init():
    hvd.init()
    yield
    hvd.barrier()


@pytest.fixture
def shared_path(tmp_path):
    """A path that is the same on every rank (rank 0's temporary folder)."""
    folder = hvd.broadcast_object(str(tmp_path), root_rank=0, name="shared_path")
    return os.path.join(folder, "compute.json")
