"""The in-place path of GPU tensors (dlpack_views): their memory through DLPack, the result in
a fresh tensor that TensorFlow made. Run here over CPU tensors, which DLPack shows the same way
(`takes` made to take them): control flow only; the GPU itself needs `make test-gpu`."""
import ctypes

import numpy as np
import pytest
import tensorflow as tf

import hvdsparse.tensorflow as hvd
from conftest import execute, rank_values
from hvdsparse.common import _lib, basics
from hvdsparse.tensorflow import dlpack_views


@pytest.fixture
def taken(monkeypatch):
    """dlpack_views takes every eager tensor; returns the list of the views it made."""
    made = []
    real = dlpack_views.View

    def view(tensor, c_dtype):
        v = real(tensor, c_dtype)
        made.append(v)
        return v
    monkeypatch.setattr(dlpack_views, "takes", lambda x: isinstance(x, tf.Tensor)
                        and hasattr(x, "numpy"))
    monkeypatch.setattr(dlpack_views, "View", view)
    return made


def test_a_view_is_the_tensors_own_memory():
    t = tf.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
    v = dlpack_views.View(t, _lib.FLOAT32)
    assert v.device == -1 and v.c.ndim == 2 and list(v.c.shape[:2]) == [2, 3]
    seen = np.ctypeslib.as_array((ctypes.c_float * 6).from_address(v.c.data))
    assert seen.tolist() == list(range(6))
    out = dlpack_views.empty_like(t)
    assert out.shape == t.shape and out.dtype == t.dtype
    assert dlpack_views.View(out, _lib.FLOAT32).c.data != v.c.data  # memory of its own


def test_gpu_tensors_are_taken_only_with_the_device_library():
    assert not dlpack_views.takes(tf.constant([1.0]))  # a CPU tensor keeps the host path
    assert not dlpack_views.takes(np.zeros(2))


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64, tf.int32, tf.float16])
def test_allreduce_in_place_equals_the_host_path(mode, taken, dtype):
    x = rank_values(hvd.rank(), [3, 4], dtype)
    before = x.numpy().copy()
    got = execute(mode, lambda t: hvd.allreduce(t, op=hvd.Sum, name="dl.ar.%s" % dtype.name), x)
    want = sum(rank_values(r, [3, 4], tf.float64).numpy() for r in range(hvd.size()))
    np.testing.assert_array_equal(got.numpy().astype(np.float64), want)
    np.testing.assert_array_equal(x.numpy(), before)  # the input stays as it was
    assert len(taken) == 2  # the input's view and the output's


def test_grouped_allreduce_and_the_gradient_tape_in_place(mode, taken):
    xs = [rank_values(hvd.rank(), [5], tf.float32), rank_values(hvd.rank(), [2, 2], tf.float64)]
    got = execute(mode, lambda a, b: hvd.grouped_allreduce([a, b], op=hvd.Average,
                                                           name="dl.gar"), *xs)
    for g, x in zip(got, xs):
        want = np.mean([rank_values(r, x.shape, tf.float64).numpy()
                        for r in range(hvd.size())], axis=0)
        np.testing.assert_allclose(g.numpy(), want, rtol=1e-6)
    assert len(taken) == 4
    w = tf.Variable([1.0, 2.0])

    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(w * w) * float(hvd.rank() + 1)
        tape = hvd.DistributedGradientTape(tape)
        return tape.gradient(loss, [w])[0]
    grad = execute(mode, step)
    mean_factor = np.mean([r + 1 for r in range(hvd.size())])
    np.testing.assert_allclose(grad.numpy(), 2 * np.array([1.0, 2.0]) * mean_factor)
    assert len(taken) == 6


def test_a_mismatch_still_fails_every_rank(taken):
    x = tf.ones([2 + hvd.rank()])  # shapes differ by rank
    with pytest.raises(tf.errors.FailedPreconditionError, match="dl.mismatch"):
        hvd.allreduce(x, name="dl.mismatch")
    assert len(taken) == 2


def test_broadcast_in_place_into_a_copy_of_its_own(mode, taken):
    root = hvd.size() - 1
    x = tf.fill([4, 3], float(hvd.rank() + 1))
    got = execute(mode, lambda t: hvd.broadcast(t, root_rank=root, name="dl.bc"), x)
    np.testing.assert_array_equal(got.numpy(), np.full([4, 3], float(root + 1)))
    np.testing.assert_array_equal(x.numpy(), np.full([4, 3], float(hvd.rank() + 1)))
    assert len(taken) == 1  # the copy's view
    v = tf.Variable(tf.fill([3], float(hvd.rank())))
    hvd.broadcast_variables([v], root_rank=root)
    np.testing.assert_array_equal(v.numpy(), np.full([3], float(root)))
    assert len(taken) == 2


def test_outputs_the_runtime_sizes_are_made_on_the_inputs_device(mode, taken):
    n, r = hvd.size(), hvd.rank()
    rows = tf.fill([r + 1, 2], float(r))  # uneven first dimensions
    got = execute(mode, lambda t: hvd.allgather(t, name="dl.ag"), rows)
    want = np.concatenate([np.full([q + 1, 2], float(q)) for q in range(n)])
    np.testing.assert_array_equal(got.numpy(), want)
    assert len(taken) == 2  # the input's view and the output the callback made
    send = tf.range(n * 2, dtype=tf.float32) + 100 * r
    out, received = execute(mode, lambda t: hvd.alltoall(t, splits=[2] * n, name="dl.a2a"),
                            send)
    want = np.concatenate([np.arange(2 * r, 2 * r + 2) + 100.0 * q for q in range(n)])
    np.testing.assert_array_equal(out.numpy(), want)
    np.testing.assert_array_equal(received.numpy(), [2] * n)
    x = tf.ones([2 * n, 3], tf.float64) * (r + 1)
    rs = execute(mode, lambda t: hvd.reducescatter(t, op=hvd.Sum, name="dl.rs"), x)
    np.testing.assert_array_equal(rs.numpy(), np.full([2, 3], n * (n + 1) / 2))
    g = execute(mode, lambda a, b: hvd.grouped_reducescatter([a, b], op=hvd.Sum,
                                                             name="dl.grs"), x, x * 2)
    np.testing.assert_array_equal(g[1].numpy(), np.full([2, 3], n * (n + 1)))
    assert len(taken) == 2 + 2 + 2 + 4
    assert not dlpack_views._outputs  # every operation's allocator let go


@pytest.fixture
def routed(monkeypatch, taken):
    """The NCCL route as the binding sees it (GPU tensors' collectives by NCCL)."""
    monkeypatch.setattr(basics, "gpu_operations_routed", lambda: True)
    return taken


def _slices(r):
    """Rank r's rows of a [10, 2] tensor: repeats inside and across ranks."""
    idx = tf.constant([r % 10, 3, 3, 9 - r], tf.int64)
    return tf.IndexedSlices(tf.reshape(tf.range(8, dtype=tf.float32) + 10 * r, [4, 2]), idx,
                            dense_shape=tf.constant([10, 2], tf.int64))


@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average])
def test_indexed_slices_gathered_on_the_gpu_as_horovod_returns_them(mode, routed, op):
    n, r = hvd.size(), hvd.rank()
    got = execute(mode, lambda v, i: hvd.allreduce(
        tf.IndexedSlices(v, i, dense_shape=tf.constant([10, 2], tf.int64)), op=op,
        name="dl.slices.%d" % op), _slices(r).values, _slices(r).indices)
    assert got.indices.shape[0] == 4 * n  # every rank's rows, in rank order
    np.testing.assert_array_equal(got.indices.numpy(),
                                  np.concatenate([_slices(q).indices.numpy() for q in range(n)]))
    want = sum(tf.math.unsorted_segment_sum(_slices(q).values, _slices(q).indices, 10).numpy()
               for q in range(n)) / (n if op == hvd.Average else 1)
    dense = tf.math.unsorted_segment_sum(got.values, got.indices, 10).numpy()
    np.testing.assert_allclose(dense, want, rtol=1e-6)
    every = hvd.allgather(tf.reshape(got.values, [1, -1]), name="dl.slices.same.%d" % op)
    assert bool(tf.reduce_all(every == every[0]))
    assert len(routed) >= 2  # the values' and the indices' views at least


def test_indexed_slices_out_of_range_fail_every_rank(routed):
    r = hvd.rank()
    idx = tf.constant([1, 12 if r == hvd.size() - 1 else 2], tf.int64)
    s = tf.IndexedSlices(tf.ones([2, 2]), idx, dense_shape=tf.constant([10, 2], tf.int64))
    with pytest.raises(ValueError, match="'sparse_allreduce.dl.slices.bad': a rank sent an "
                                         "index outside the tensor's 10 rows"):
        hvd.allreduce(s, op=hvd.Sum, name="dl.slices.bad")


def test_indexed_slices_beside_the_runtimes_path_fail_every_rank(routed, monkeypatch):
    if hvd.rank() == 0:  # this rank takes the runtime's sparse path
        monkeypatch.setattr(basics, "gpu_operations_routed", lambda: False)
    with pytest.raises(tf.errors.FailedPreconditionError,
                       match="SPARSE_ALLREDUCE.*ALLGATHER|ALLGATHER.*SPARSE_ALLREDUCE"):
        hvd.allreduce(_slices(hvd.rank()), op=hvd.Sum, name="dl.slices.mixed")
