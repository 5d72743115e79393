"""One suite for what the bindings share, run once per binding: HVDSPARSE_TEST_BINDING names it
("torch" or "tensorflow"). Every rank runs the same tests in the same order under
`hvdsparse run`; `fw` lends the binding's tensors and error classes, so each test is written
once and checks both bindings behave the same."""
import os

import pytest

os.environ.setdefault("HOROVOD_DYNAMIC_PROCESS_SETS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

BINDING = os.environ.get("HVDSPARSE_TEST_BINDING", "torch")


class _Torch:
    """The torch binding's side of the tests."""

    def __init__(self):
        import torch
        import hvdsparse.torch as hvd
        self.torch, self.hvd = torch, hvd
        self.invalid_argument = ValueError
        self.unknown = hvd.HorovodInternalError

    def tensor(self, values):
        return self.torch.tensor(values, dtype=self.torch.float32)

    @staticmethod
    def values(t):
        return t.tolist()

    def sparse_allreduce(self, op):
        s = self.torch.sparse_coo_tensor([[0]], [1.0], (2,))
        return self.hvd.sparse_allreduce(s, op=op)


class _TensorFlow:
    """The TensorFlow binding's side of the tests (eager)."""

    def __init__(self):
        import tensorflow as tf
        import hvdsparse.tensorflow as hvd
        self.tf, self.hvd = tf, hvd
        self.invalid_argument = hvd.HorovodInvalidArgumentError
        from hvdsparse.tensorflow.runtime_calls import HorovodUnknownError
        self.unknown = HorovodUnknownError

    def tensor(self, values):
        return self.tf.constant(values, dtype=self.tf.float32)

    @staticmethod
    def values(t):
        return t.numpy().tolist()

    def sparse_allreduce(self, op):
        s = self.tf.IndexedSlices(self.tf.constant([[1.0]]), self.tf.constant([0]),
                                  dense_shape=self.tf.constant([2, 1]))
        return self.hvd.allreduce(s, op=op)


_BINDINGS = {"torch": _Torch, "tensorflow": _TensorFlow}
if BINDING not in _BINDINGS:
    raise RuntimeError("HVDSPARSE_TEST_BINDING must be one of %s, not %r"
                       % (", ".join(sorted(_BINDINGS)), BINDING))
FW = _BINDINGS[BINDING]()


@pytest.fixture
def fw():
    return FW


@pytest.fixture
def hvd():
    FW.hvd.init()
    yield FW.hvd
    if FW.hvd.is_initialized():
        FW.hvd.barrier()
