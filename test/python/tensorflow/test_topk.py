"""Compression.topk for TensorFlow: selection against a sort, error feedback in a tf.Variable,
DistributedGradientTape training (eager and tf.function) against a single-process reference
that runs every rank's top-k with error feedback and averages, the Keras DistributedOptimizer,
and the residuals in a checkpoint and a broadcast.

Every rank builds every rank's data from the same seeds, so the reference is computed locally."""
import math
import os
import tempfile

import keras
import numpy as np
import pytest
import tensorflow as tf

import hvdsparse.tensorflow as hvd
import hvdsparse.tensorflow.keras as hvdk
from hvdsparse.tensorflow.topk import TopKCompressor


def distinct(n, seed):
    """n float32 values of distinct magnitudes in random order."""
    rng = np.random.RandomState(seed)
    mags = (np.arange(n) + 1.0) / n
    return (rng.permutation(mags) * rng.choice([-1.0, 1.0], n)).astype(np.float32)


def sort_topk(x, k):
    return np.argsort(-np.abs(x), kind="stable")[:k]


# ---- selection ---------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 7, 1000, 65535])
@pytest.mark.parametrize("ratio", [0.001, 0.01, 0.3, 1.0])
def test_exact_topk_matches_sort(n, ratio):
    x = distinct(n, n)
    comp = TopKCompressor(ratio, sampled_above=None)
    values, idx = comp.select(tf.constant(x))
    k = comp.k(n)
    assert k == min(n, max(1, math.ceil(ratio * n)))
    assert sorted(idx.numpy().tolist()) == sorted(sort_topk(x, k).tolist())
    np.testing.assert_array_equal(values.numpy(), x[idx.numpy()])


@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_sampled_threshold_selects_the_exact_topk(mode):
    n = 1 << 18
    comp = TopKCompressor(0.01)
    assert comp.sampled(n)
    select = comp.select if mode == "eager" else tf.function(comp.select)
    for seed in range(2):
        x = distinct(n, seed)
        _, idx = select(tf.constant(x))
        assert sorted(idx.numpy().tolist()) == sorted(sort_topk(x, comp.k(n)).tolist())
    # A threshold at the k-th magnitude (no margin) misses sometimes: the fallback keeps it exact.
    tight = TopKCompressor(0.01, oversample=1.0, margin=0)
    for seed in range(6):
        x = distinct(n, 50 + seed)
        _, idx = tight.select(tf.constant(x))
        assert sorted(idx.numpy().tolist()) == sorted(sort_topk(x, tight.k(n)).tolist())


@pytest.mark.parametrize("mode", ["eager", "graph"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_feedback_in_c_and_in_tensorflow_agree(mode, dtype):
    """float32/float64 CPU residuals select in C (indices in increasing order), float16 with
    TensorFlow's ops; both send the exact top k of residual + gradient and keep the rest."""
    n = 1 << 17
    comp = TopKCompressor(0.01)
    res = comp.residual_for("g", tf.TensorShape([n]), tf.as_dtype(dtype))
    start = distinct(n, 7).astype(dtype)
    res.assign(start)
    grad = (distinct(n, 8) * 0.5).astype(dtype)
    acc = start + grad
    feedback = comp.feedback if mode == "eager" else tf.function(comp.feedback)
    values, idx = feedback(tf.constant(grad), res)
    idx, values = idx.numpy(), values.numpy()
    k = comp.k(n)
    assert sorted(idx.tolist()) == sorted(sort_topk(acc, k).tolist())
    np.testing.assert_array_equal(values, acc[idx])
    kept = acc.copy()
    kept[idx] = 0
    np.testing.assert_array_equal(res.numpy(), kept)
    if dtype in (np.float32, np.float64):
        assert comp._calls == 1, "selected by TensorFlow's ops, not in C"
        assert (np.diff(idx) > 0).all(), "C gives the indices in increasing order"
    else:
        assert comp._calls == 0


def test_error_feedback_tracks_the_gradient_sum():
    n, comp = 1000, TopKCompressor(0.05)
    res = comp.residual_for("g", tf.TensorShape([n]), tf.float64)
    rng = np.random.RandomState(3)
    sent, total = np.zeros(n), np.zeros(n)
    d = comp.k(n) / n
    bound = worst = 0.0
    for _ in range(300):
        g = rng.randn(n)
        total += g
        values, idx = comp.feedback(tf.constant(g), res)
        np.add.at(sent, idx.numpy(), values.numpy())
        np.testing.assert_allclose(sent + res.numpy(), total, rtol=0, atol=1e-9)
        bound = max(bound, math.sqrt(4 * (1 - d)) / d * np.linalg.norm(g))
        worst = max(worst, np.linalg.norm(res.numpy()))
    assert worst < bound
    assert comp.residual_for("g", tf.TensorShape([n]), tf.float64) is res
    assert comp.residuals() == [res]


# ---- training ----------------------------------------------------------------------------------
def _variables():
    rng = np.random.RandomState(0)
    return [tf.Variable(rng.randn(8, 16).astype(np.float32) * 0.3),
            tf.Variable(np.zeros(16, np.float32)),
            tf.Variable(rng.randn(16, 4).astype(np.float32) * 0.3),
            tf.Variable(np.zeros(4, np.float32))]


def _batch(rank, step):
    rng = np.random.RandomState(1000 * step + rank)
    return rng.randn(6, 8).astype(np.float32), rng.randn(6, 4).astype(np.float32)


def _loss(vs, x, y):
    h = tf.tanh(tf.matmul(x, vs[0]) + vs[1])
    return tf.reduce_mean(tf.square(tf.matmul(h, vs[2]) + vs[3] - y))


def _reference(steps, ratio, min_numel=0, lr=0.05):
    n = hvd.size()
    vs = _variables()
    comps = [TopKCompressor(ratio, min_numel=min_numel) for _ in range(n)]
    for s in range(steps):
        acc = [np.zeros(v.shape, np.float32) for v in vs]
        for q in range(n):
            with tf.GradientTape() as tape:
                loss = _loss(vs, *_batch(q, s))
            for j, g in enumerate(tape.gradient(loss, vs)):
                if comps[q].applies(int(np.prod(g.shape))):
                    res = comps[q].residual_for(j, g.shape, g.dtype)
                    values, idx = comps[q].feedback(g, res)
                    flat = acc[j].reshape(-1)
                    np.add.at(flat, idx.numpy(), values.numpy())
                else:
                    acc[j] += g.numpy()
        for v, a in zip(vs, acc):
            v.assign_sub(lr * a / n)
    return vs


@pytest.mark.parametrize("mode", ["eager", "graph"])
@pytest.mark.parametrize("ratio,min_numel", [(0.1, 0), (0.25, 20), (1.0, 0)])
def test_tape_training_matches_the_single_process_reference(mode, ratio, min_numel):
    vs = _variables()
    comp = hvd.Compression.topk(ratio, min_numel=min_numel)

    def step(x, y):
        with tf.GradientTape() as tape:
            loss = _loss(vs, x, y)
        tape = hvd.DistributedGradientTape(tape, compression=comp)
        for v, g in zip(vs, tape.gradient(loss, vs)):
            v.assign_sub(0.05 * g)
    if mode == "graph":
        step = tf.function(step)
    for s in range(12):
        step(*_batch(hvd.rank(), s))
    ref = _reference(12, ratio, min_numel)
    for a, b in zip(vs, ref):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-5)
    expected = sum(1 for v in vs if comp.applies(int(np.prod(v.shape))))
    assert len(comp.residuals()) == expected
    flat = tf.concat([tf.reshape(v, [-1]) for v in vs], 0)
    gathered = hvd.allgather(tf.expand_dims(flat, 0)).numpy()
    assert (gathered == gathered[0]).all()


@pytest.mark.parametrize("algorithm", ["dsar_split_allgather", "ssar_split_allgather", "zen"])
def test_tape_quantize_bits(algorithm):
    vs = _variables()
    comp = hvd.Compression.topk(0.5)
    for s in range(5):
        with tf.GradientTape() as tape:
            loss = _loss(vs, *_batch(hvd.rank(), s))
        tape = hvd.DistributedGradientTape(tape, compression=comp, quantize_bits=4,
                                           sparse_algorithm=algorithm)
        for v, g in zip(vs, tape.gradient(loss, vs)):
            v.assign_sub(0.05 * g)
    flat = tf.concat([tf.reshape(v, [-1]) for v in vs], 0)
    gathered = hvd.allgather(tf.expand_dims(flat, 0)).numpy()
    assert (gathered == gathered[0]).all()  # identical on every rank
    ref = _reference(5, 0.5)
    diff = max(float(np.abs(a.numpy() - b.numpy()).max()) for a, b in zip(vs, ref))
    assert 0 < diff < 0.1  # quantized (not exact), and close


def test_quantize_bits_rejects_other_widths():
    with pytest.raises(ValueError, match="quantize_bits"):
        hvd.DistributedGradientTape(tf.GradientTape(), compression=hvd.Compression.topk(0.1),
                                    quantize_bits=3)
    with pytest.raises(ValueError, match="quantize_bits"):
        hvdk.DistributedOptimizer(keras.optimizers.SGD(0.05), quantize_bits=5)


def test_keras_optimizer_fit_with_topk():
    keras.utils.set_random_seed(3)
    model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(8, activation="tanh"),
                              keras.layers.Dense(1)])
    comp = hvd.Compression.topk(0.2)
    opt = hvdk.DistributedOptimizer(keras.optimizers.SGD(0.05), compression=comp)
    model.compile(optimizer=opt, loss="mse")
    rng = np.random.RandomState(hvd.rank())
    x, y = rng.randn(24, 5).astype(np.float32), rng.randn(24, 1).astype(np.float32)
    model.fit(x, y, batch_size=6, epochs=2, verbose=0, shuffle=False)
    assert len(comp.residuals()) == 4
    assert any(np.abs(r.numpy()).sum() > 0 for r in comp.residuals())
    flat = tf.concat([tf.reshape(w, [-1]) for w in model.trainable_weights], 0)
    gathered = hvd.allgather(tf.expand_dims(flat, 0)).numpy()
    assert (gathered == gathered[0]).all()


def test_residuals_checkpoint_and_broadcast():
    vs = _variables()
    comp = hvd.Compression.topk(0.1)
    for s in range(3):
        with tf.GradientTape() as tape:
            loss = _loss(vs, *_batch(hvd.rank(), s))
        tape = hvd.DistributedGradientTape(tape, compression=comp)
        tape.gradient(loss, vs)
    saved = [r.numpy() for r in comp.residuals()]
    with tempfile.TemporaryDirectory() as d:
        path = tf.train.Checkpoint(compression=comp).write(os.path.join(d, "ckpt"))
        for r in comp.residuals():
            r.assign(tf.zeros_like(r))
        tf.train.Checkpoint(compression=comp).read(path).assert_consumed()
    for r, want in zip(comp.residuals(), saved):
        np.testing.assert_array_equal(r.numpy(), want)
    hvd.broadcast_variables(comp.residuals(), root_rank=0)
    flat = tf.concat([tf.reshape(r, [-1]) for r in comp.residuals()], 0)
    gathered = hvd.allgather(tf.expand_dims(flat, 0)).numpy()
    assert (gathered == gathered[0]).all()
