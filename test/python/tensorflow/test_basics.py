import os

import tensorflow as tf

import hvdsparse.tensorflow as hvd


def test_rank_size():
    assert hvd.is_initialized()
    assert hvd.size() == int(os.environ.get("HOROVOD_SIZE", hvd.size()))
    assert 0 <= hvd.rank() < hvd.size()
    assert 0 <= hvd.local_rank() < hvd.local_size()
    assert hvd.gloo_built() and hvd.gloo_enabled() and not hvd.mpi_enabled()
    assert hvd.ccl_built() is False


def test_graph_side_queries():
    @tf.function
    def f():
        return hvd.rank_op(), hvd.size_op(), hvd.local_rank_op(), hvd.local_size_op()
    r, s, lr, ls = [int(t.numpy()) for t in f()]
    assert (r, s, lr, ls) == (hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size())
    assert int(hvd.process_set_included_op().numpy()) == 1


def test_ops_exported():
    assert (hvd.Average, hvd.Sum, hvd.Min, hvd.Max, hvd.Product) == (0, 1, 3, 4, 5)
    assert issubclass(hvd.HorovodPreconditionError, tf.errors.FailedPreconditionError)
    assert issubclass(hvd.HorovodPreconditionError, RuntimeError)
