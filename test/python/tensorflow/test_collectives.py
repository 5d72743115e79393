"""Each collective eagerly and inside tf.function (the `mode` fixture)."""
import numpy as np
import pytest
import tensorflow as tf

import hvdsparse.tensorflow as hvd
from conftest import execute, rank_values

DTYPES = [tf.int32, tf.int64, tf.float16, tf.float32, tf.float64]


def _expected(op, shape, dtype, scale=1.0):
    vals = [rank_values(r, shape, tf.float64).numpy() for r in range(hvd.size())]
    if op == hvd.Sum:
        out = np.sum(vals, axis=0)
    elif op == hvd.Average:
        out = np.mean(vals, axis=0)
    elif op == hvd.Min:
        out = np.min(vals, axis=0)
    elif op == hvd.Max:
        out = np.max(vals, axis=0)
    else:
        out = np.prod(vals, axis=0)
    return out * scale


@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average, hvd.Min, hvd.Max, hvd.Product])
@pytest.mark.parametrize("dtype", DTYPES)
def test_allreduce_ops(mode, op, dtype):
    shape = [3, 4]
    x = rank_values(hvd.rank(), shape, dtype)
    y = execute(mode, lambda t: hvd.allreduce(t, op=op), x)
    assert y.dtype == dtype and y.shape == x.shape
    want = _expected(op, shape, dtype)
    if op == hvd.Average and dtype.is_integer:
        want = np.trunc(want)  # integers: sum, then scaled and truncated toward zero, as Horovod
    np.testing.assert_allclose(y.numpy().astype(np.float64), want, rtol=1e-3)


def test_allreduce_prescale_postscale(mode):
    x = rank_values(hvd.rank(), [5], tf.float64)
    y = execute(mode, lambda t: hvd.allreduce(t, op=hvd.Sum, prescale_factor=2.0,
                                              postscale_factor=0.5 * 3), x)
    np.testing.assert_allclose(y.numpy(), _expected(hvd.Sum, [5], tf.float64, 3.0))


def test_allreduce_average_default_and_compression(mode):
    x = rank_values(hvd.rank(), [4, 2], tf.float32)
    for comp in (hvd.Compression.none, hvd.Compression.fp16, hvd.Compression.bf16):
        y = execute(mode, lambda t: hvd.allreduce(t, compression=comp), x)
        assert y.dtype == tf.float32
        np.testing.assert_allclose(y.numpy(), _expected(hvd.Average, [4, 2], tf.float32),
                                   rtol=1e-2)


def test_grouped_allreduce(mode):
    xs = [rank_values(hvd.rank(), s, tf.float32) for s in ([3], [2, 2], [1, 2, 3])]
    ys = execute(mode, lambda *t: hvd.grouped_allreduce(list(t), op=hvd.Sum), *xs)
    for x, y in zip(xs, ys):
        assert y.shape == x.shape
        np.testing.assert_allclose(y.numpy(), _expected(hvd.Sum, x.shape, tf.float32))


def test_allreduce_indexed_slices(mode):
    r, n = hvd.rank(), hvd.size()
    values = tf.fill([2, 3], float(r + 1))
    indices = tf.constant([r, r + 1], dtype=tf.int64)

    def f(v, i):
        s = hvd.allreduce(tf.IndexedSlices(v, i, tf.constant([n + 1, 3], tf.int64)),
                          op=hvd.Average)
        return s.values, s.indices, tf.convert_to_tensor(s)
    vals, idx, dense = execute(mode, f, values, indices)
    # The sparse path returns the sum's rows once each, sorted (not Horovod's concatenation).
    assert vals.shape == (n + 1, 3)
    np.testing.assert_array_equal(idx.numpy(), np.arange(n + 1))
    expected = np.zeros([n + 1, 3])
    for q in range(n):
        expected[q] += (q + 1) / n
        expected[q + 1] += (q + 1) / n
    np.testing.assert_allclose(dense.numpy(), expected, rtol=1e-6)
    with pytest.raises(NotImplementedError):
        hvd.allreduce(tf.IndexedSlices(values, indices), op=hvd.Max)


def test_allgather_variable_size(mode):
    r = hvd.rank()
    x = tf.fill([r + 1, 2], float(r))
    y = execute(mode, lambda t: hvd.allgather(t), x)
    expected = np.concatenate([np.full([q + 1, 2], float(q)) for q in range(hvd.size())])
    np.testing.assert_array_equal(y.numpy(), expected)
    ys = execute(mode, lambda a, b: hvd.grouped_allgather([a, b]), x, tf.constant([r]))
    np.testing.assert_array_equal(ys[1].numpy(), np.arange(hvd.size()))


def test_broadcast(mode):
    for root in range(hvd.size()):
        x = rank_values(hvd.rank(), [3, 3], tf.float32)
        y = execute(mode, lambda t: hvd.broadcast(t, root), x)
        np.testing.assert_array_equal(y.numpy(), rank_values(root, [3, 3], tf.float32).numpy())


def test_broadcast_inplace_and_variables(mode):
    r = hvd.rank()
    v1 = tf.Variable(tf.fill([2], float(r)))
    v2 = tf.Variable(tf.fill([3], r))
    if mode == "eager":
        hvd.broadcast_variables([v1, v2], root_rank=0)
    else:
        @tf.function
        def f():
            hvd.broadcast_variables([v1, v2], root_rank=0)
        f()
    np.testing.assert_array_equal(v1.numpy(), [0.0, 0.0])
    np.testing.assert_array_equal(v2.numpy(), [0, 0, 0])
    v3 = tf.Variable(tf.fill([2], float(r + 5)))
    hvd.broadcast_(v3, root_rank=hvd.size() - 1)
    np.testing.assert_array_equal(v3.numpy(), [hvd.size() + 4.0] * 2)


def test_alltoall(mode):
    r, n = hvd.rank(), hvd.size()
    # rank r sends (q + 1) rows to rank q, each row filled with r
    splits = tf.constant([q + 1 for q in range(n)], tf.int32)
    x = tf.fill([int(tf.reduce_sum(splits)), 2], float(r))
    out, received = execute(mode, lambda t, s: hvd.alltoall(t, splits=s), x, splits)
    np.testing.assert_array_equal(received.numpy(), [r + 1] * n)
    expected = np.concatenate([np.full([r + 1, 2], float(q)) for q in range(n)])
    np.testing.assert_array_equal(out.numpy(), expected)
    eq = execute(mode, lambda t: hvd.alltoall(t), tf.fill([n * 2], r))  # no splits: output only
    np.testing.assert_array_equal(eq.numpy(), np.repeat(np.arange(n), 2))


def test_reducescatter(mode):
    r, n = hvd.rank(), hvd.size()
    x = rank_values(r, [2 * n, 3], tf.float32)
    y = execute(mode, lambda t: hvd.reducescatter(t, op=hvd.Sum), x)
    full = _expected(hvd.Sum, [2 * n, 3], tf.float32)
    np.testing.assert_allclose(y.numpy(), full[2 * r:2 * r + 2])
    ys = execute(mode, lambda a, b: hvd.grouped_reducescatter([a, b], op=hvd.Average), x, x)
    np.testing.assert_allclose(ys[1].numpy(),
                               _expected(hvd.Average, [2 * n, 3], tf.float32)[2 * r:2 * r + 2],
                               rtol=1e-6)


def test_join_and_barrier(mode):
    last = execute(mode, lambda: hvd.join())
    assert 0 <= int(last.numpy()) < hvd.size()
    hvd.barrier()


def test_mismatch_error_every_rank(mode):
    x = tf.ones([hvd.rank() + 2])
    if mode == "eager":
        with pytest.raises(tf.errors.FailedPreconditionError, match="Mismatched ALLREDUCE"):
            hvd.allreduce(x)
        with pytest.raises(RuntimeError, match="Mismatched data types"):
            hvd.allreduce(tf.ones([2], dtype=tf.float32 if hvd.rank() == 0 else tf.float64))
    else:
        # relayed out of the py_function as FailedPreconditionError (graph_mode.py)
        with pytest.raises(tf.errors.FailedPreconditionError,
                           match="Mismatched ALLREDUCE tensor shapes"):
            tf.function(lambda t: hvd.allreduce(t))(x)
    # the runtime is still usable afterwards
    y = hvd.allreduce(tf.ones([2]), op=hvd.Sum)
    np.testing.assert_array_equal(y.numpy(), [hvd.size()] * 2)


def test_broadcast_root_mismatch():
    with pytest.raises(tf.errors.FailedPreconditionError, match="root"):
        hvd.broadcast(tf.ones([2]), root_rank=hvd.rank())


def test_objects():
    obj = {"rank": hvd.rank(), "payload": list(range(hvd.rank() + 1))}
    got = hvd.broadcast_object(obj, root_rank=0)
    assert got == {"rank": 0, "payload": [0]}
    everyone = hvd.allgather_object(obj)
    assert [o["rank"] for o in everyone] == list(range(hvd.size()))
    assert hvd.broadcast_object_fn(root_rank=0)("x%d" % hvd.rank()) == "x0"


def test_objects_inside_tf_function_say_they_run_eagerly():
    """Horovod's fail here too, with an AttributeError (docs/tensorflow.md)."""
    for fn in (lambda: hvd.broadcast_object(1, root_rank=0), lambda: hvd.allgather_object(1)):
        with pytest.raises(RuntimeError, match="runs eagerly; call it outside tf.function"):
            tf.function(fn)()


def test_scalars(mode):
    y = execute(mode, lambda t: hvd.allreduce(t, op=hvd.Sum), tf.constant(2.0))
    assert y.shape == () and float(y.numpy()) == 2.0 * hvd.size()
    b = execute(mode, lambda t: hvd.broadcast(t, 0), tf.constant(hvd.rank()))
    assert b.shape == () and int(b.numpy()) == 0


def test_adasum_adds_orthogonal_and_averages_parallel_gradients(mode):
    """op=hvd.Adasum (the torch suite checks it against the numpy reference of the formula)."""
    n, size, r = 12, hvd.size(), hvd.rank()
    mine = np.zeros(n)
    mine[r::size] = 1.0 + r
    want = np.zeros(n)
    for q in range(size):
        want[q::size] = 1.0 + q
    got = execute(mode, lambda t: hvd.allreduce(t, op=hvd.Adasum, name="adasum.orth"),
                  tf.constant(mine))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    same = tf.linspace(-1.0, 1.0, n)
    got = execute(mode, lambda t: hvd.allreduce(t, op=hvd.Adasum, name="adasum.par"), same)
    np.testing.assert_allclose(got.numpy(), same.numpy(), rtol=1e-6)


def test_average_of_equal_float32_values_is_exact():
    """Average divides the float32 sum by the size, so the average of equal values is
    TensorFlow's own (x * n) / n bit for bit (Horovod's tests compare it with threshold 0)."""
    n = hvd.size()
    x = (np.arange(1, 257, dtype=np.float32) / np.float32(7)).astype(np.float32)
    total = x.copy()
    for _ in range(n - 1):
        total = total + x
    y = hvd.allreduce(tf.constant(x), op=hvd.Average)
    np.testing.assert_array_equal(y.numpy(), (x * np.float32(n)) / np.float32(n))
    np.testing.assert_array_equal(y.numpy(), total / np.float32(n))
