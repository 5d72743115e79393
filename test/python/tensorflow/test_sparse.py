"""tf.IndexedSlices through the sparse allreduce: hvd.allreduce, DistributedGradientTape and the
Keras DistributedOptimizer. Every rank builds every rank's input from the same seeds and checks
against the dense sum (or mean)."""
import numpy as np
import pytest
import tensorflow as tf

import hvdsparse.tensorflow as hvd
import hvdsparse.tensorflow.keras as hvdk
from conftest import execute
from hvdsparse.tensorflow import runtime_calls

ALGORITHMS = ["dense", "allgather", "ssar_recursive_doubling", "ssar_split_allgather",
              "dsar_split_allgather", "zen"]
ROWS, DIM = 20, 3


def rank_slices(r, nnz, index_dtype=tf.int64, seed=0, rows=ROWS):
    """Rank r's slices: unsorted indices with repeats, small integer values."""
    rng = np.random.RandomState(seed * 1009 + r)
    idx = rng.randint(0, rows, size=nnz)
    idx = np.concatenate([idx, idx[:nnz // 3]])
    vals = rng.randint(-4, 5, size=(idx.size, DIM)).astype(np.float32)
    return tf.IndexedSlices(tf.constant(vals), tf.constant(idx, dtype=index_dtype),
                            tf.constant([rows, DIM], dtype=tf.int64))


def dense_of(s):
    out = np.zeros([int(d) for d in s.dense_shape.numpy()], dtype=np.float64)
    np.add.at(out, s.indices.numpy(), s.values.numpy())
    return out


def check(out, inputs, op):
    assert isinstance(out, tf.IndexedSlices)
    idx = out.indices.numpy()
    assert out.indices.dtype == inputs[0].indices.dtype
    assert np.all(idx[1:] > idx[:-1])  # sorted unique
    expected = sum(dense_of(s) for s in inputs)
    if op == hvd.Average:
        expected /= len(inputs)
    np.testing.assert_allclose(tf.convert_to_tensor(out).numpy(), expected, rtol=1e-6,
                               atol=1e-6)


@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average])
@pytest.mark.parametrize("index_dtype", [tf.int32, tf.int64])
@pytest.mark.parametrize("empty_rank", [False, True])
def test_indexed_slices_allreduce(mode, op, index_dtype, empty_rank):
    n, r = hvd.size(), hvd.rank()
    inputs = [rank_slices(q, 0 if empty_rank and q == n - 1 else 4 + q, index_dtype)
              for q in range(n)]
    mine = inputs[r]

    def f(v, i, s):
        out = hvd.allreduce(tf.IndexedSlices(v, i, s), op=op)
        return out.values, out.indices
    vals, idx = execute(mode, f, mine.values, mine.indices, mine.dense_shape)
    check(tf.IndexedSlices(vals, idx, mine.dense_shape), inputs, op)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("density", ["sparse", "full"])
def test_indexed_slices_forced_algorithm(algorithm, density):
    n, r = hvd.size(), hvd.rank()
    nnz = 3 if density == "sparse" else 4 * ROWS
    inputs = [rank_slices(q, nnz, seed=5) for q in range(n)]
    out = hvd.allreduce(inputs[r], op=hvd.Sum, sparse_algorithm=algorithm)
    check(out, inputs, hvd.Sum)
    # the algorithm that ran, seen from the runtime call underneath
    s = inputs[r]
    op = runtime_calls._start_sparse_allreduce(s.values, s.indices, s.dense_shape,
                                               "sp.tf.alg.%s.%s" % (algorithm, density), 0,
                                               hvd.Sum, algorithm)
    vals, idx, ran = runtime_calls._complete([op])[0]
    assert ran == algorithm
    check(tf.IndexedSlices(tf.constant(vals), tf.constant(idx), s.dense_shape), inputs, hvd.Sum)


def test_indexed_slices_int64_row_range():
    """More rows than an int32 addresses: indices travel as int64."""
    n, r = hvd.size(), hvd.rank()
    rows = (1 << 31) + 8
    inputs = [tf.IndexedSlices(tf.ones([2, DIM]) * (q + 1),
                               tf.constant([rows - 1 - q, 3], tf.int64),
                               tf.constant([rows, DIM], tf.int64)) for q in range(n)]
    out = hvd.allreduce(inputs[r], op=hvd.Sum)
    got = dict(zip(out.indices.numpy().tolist(), out.values.numpy()[:, 0].tolist()))
    expected = {3: float(sum(q + 1 for q in range(n)))}
    for q in range(n):
        expected[rows - 1 - q] = float(q + 1)
    assert got == expected


def test_indexed_slices_out_of_range_fails_every_rank():
    n, r = hvd.size(), hvd.rank()
    s = rank_slices(r, 4, seed=9)
    if r == n - 1:
        s = tf.IndexedSlices(s.values, tf.tensor_scatter_nd_update(s.indices, [[0]], [777]),
                             s.dense_shape)
    with pytest.raises((ValueError, hvd.HorovodInternalError)) as info:
        hvd.allreduce(s, op=hvd.Sum, name="sp.tf.bad")
    assert "777" in str(info.value)
    ok = hvd.allreduce(rank_slices(r, 2, seed=1), op=hvd.Sum)  # still usable
    assert ok.values.shape[1] == DIM


def test_indexed_slices_errors_and_fallback():
    s = rank_slices(hvd.rank(), 2)
    with pytest.raises(NotImplementedError):
        hvd.allreduce(s, op=hvd.Max)
    with pytest.raises(ValueError):
        hvd.allreduce(s, sparse_algorithm="ring")
    # without a dense_shape: Horovod's allgather (indices and values concatenated)
    out = hvd.allreduce(tf.IndexedSlices(s.values, s.indices), op=hvd.Sum)
    assert out.values.shape[0] == sum(rank_slices(q, 2).values.shape[0]
                                      for q in range(hvd.size()))


# ---- DistributedGradientTape and Keras -----------------------------------------------------
VOCAB, EMB = 200, 4


def _step_fn(emb, w, sparse_as_dense, lr=0.5, **tape_kwargs):
    def step(ids, y):
        with tf.GradientTape() as tape:
            h = tf.reduce_mean(tf.gather(emb, ids), axis=1)
            loss = tf.reduce_mean((tf.reduce_sum(h * w, axis=1) - y) ** 2)
        tape = hvd.DistributedGradientTape(tape, sparse_as_dense=sparse_as_dense,
                                           **tape_kwargs)
        g_emb, g_w = tape.gradient(loss, [emb, w])
        assert isinstance(g_emb, tf.IndexedSlices) != sparse_as_dense
        if isinstance(g_emb, tf.IndexedSlices):
            emb.scatter_sub(tf.IndexedSlices(lr * g_emb.values, g_emb.indices))
        else:
            emb.assign_sub(lr * g_emb)
        w.assign_sub(lr * g_w)
        return loss
    return step


def _train(mode, sparse_as_dense, steps=3, **tape_kwargs):
    n, r = hvd.size(), hvd.rank()
    init = np.random.RandomState(0)
    emb = tf.Variable(init.randn(VOCAB, EMB).astype(np.float32))
    w = tf.Variable(init.randn(EMB).astype(np.float32))
    step = _step_fn(emb, w, sparse_as_dense, **tape_kwargs)
    if mode == "graph":
        step = tf.function(step)
    data = np.random.RandomState(42)
    per = 4
    for _ in range(steps):
        ids = (VOCAB * data.rand(n * per, 5) ** 3).astype(np.int32)
        y = data.randn(n * per).astype(np.float32)
        step(tf.constant(ids[r * per:(r + 1) * per]), tf.constant(y[r * per:(r + 1) * per]))
    return emb.numpy(), w.numpy()


def test_tape_indexed_slices_match_dense(mode):
    dense = _train(mode, sparse_as_dense=True)
    for kwargs in ({}, {"sparse_algorithm": "zen"}):
        sparse = _train(mode, sparse_as_dense=False, **kwargs)
        for a, b in zip(sparse, dense):
            np.testing.assert_allclose(a, b, atol=1e-5)


def test_keras_optimizer_indexed_slices():
    n, r = hvd.size(), hvd.rank()
    var = tf.Variable(tf.zeros([ROWS, DIM]))
    ref = tf.Variable(tf.zeros([ROWS, DIM]))
    opt = hvdk.DistributedOptimizer(tf.keras.optimizers.SGD(1.0))
    ref_opt = hvdk.DistributedOptimizer(tf.keras.optimizers.SGD(1.0), sparse_as_dense=True)
    inputs = [rank_slices(q, 3, seed=21) for q in range(n)]
    s = inputs[r]
    opt.apply_gradients([(tf.IndexedSlices(s.values, s.indices, s.dense_shape), var)])
    ref_opt.apply_gradients([(tf.IndexedSlices(s.values, s.indices, s.dense_shape), ref)])
    expected = -sum(dense_of(q) for q in inputs) / n
    np.testing.assert_allclose(var.numpy(), expected, atol=1e-6)
    np.testing.assert_allclose(ref.numpy(), expected, atol=1e-6)
