"""Compression.topk for TensorFlow: selection, error feedback in a tf.Variable per gradient, and
the sparse allreduce (hvdsparse/common/topk.py has the scheme, docs/compression.md the user's
view).

DistributedGradientTape(tape, compression=hvd.Compression.topk(0.01)) and the Keras
DistributedOptimizer: for each dense gradient of a variable of at least min_numel elements,
acc = residual + gradient over a flat view; the top k of acc travel as tf.IndexedSlices over
[numel] (rows of one value: the runtime's COO over a 1-D view) through the sparse allreduce;
residual = acc - sent; the averaged result comes back scattered into a dense gradient of the
variable's shape. tf.IndexedSlices gradients keep their own sparse path, uncompressed.

The compressor is a tf.Module holding the residual variables (one per compressed gradient,
created on first use, outside any tf.function graph), so
tf.train.Checkpoint(model=model, optimizer=opt, compression=compressor) saves and restores
them (matched by creation order, which follows the gradient order), and
hvd.broadcast_variables(compressor.residuals(), root_rank=0) sends root's to every rank.
"""
import numpy as np
import tensorflow as tf

from hvdsparse.common import _lib
from hvdsparse.common.ops import Average, Sum, predivide_scales
from hvdsparse.common.topk import TopKCompressorBase
from hvdsparse.tensorflow.sparse_calls import sparse_allreduce_many


_NATIVE = {tf.float32: _lib.FLOAT32, tf.float64: _lib.FLOAT64}  # what hvds_topk_feedback takes


def _key(source, i):
    if source is None:
        return ("gradient", i)
    return source.ref() if hasattr(source, "ref") else id(source)


class _Keys:
    """gradient key -> residual variable, kept out of tf.Module's tracking (its keys are not
    strings)."""

    def __init__(self):
        self.map = {}


class TopKCompressor(TopKCompressorBase, tf.Module):
    """Compression.topk(ratio, ...) for TensorFlow (options: TopKCompressorBase)."""

    def __init__(self, *args, **kwargs):
        TopKCompressorBase.__init__(self, *args, **kwargs)
        tf.Module.__init__(self, name="topk_compression")
        self._by_key = _Keys()
        self.residual_variables = []  # tracked by tf.Module, in creation order
        self._rng = None

    def residuals(self):
        """The residual variables, in creation order."""
        return list(self.residual_variables)

    def residual_for(self, key, shape, dtype):
        """The residual of one gradient (flat, numel elements), created as zeros on first use."""
        v = self._by_key.map.get(key)
        if v is None:
            with tf.init_scope():
                v = tf.Variable(tf.zeros([shape.num_elements()], dtype), trainable=False,
                                name="topk_residual_%d" % len(self.residual_variables))
            self._by_key.map[key] = v
            self.residual_variables.append(v)
        return v

    def _generator(self):
        if self._rng is None:
            with tf.init_scope():
                self._rng = tf.random.Generator.from_seed(self.seed)
        return self._rng

    def select(self, flat):
        """(values, indices int64) of the k entries of the 1-D tensor flat (static size) largest
        in magnitude, in no particular order."""
        n = flat.shape.num_elements()
        k = self.k(n)
        if k >= n:
            idx = tf.range(n, dtype=tf.int64)
        else:
            mag = tf.abs(flat)
            idx = self._sampled(mag, n, k) if self.sampled(n) else _top(mag, k)
        return tf.gather(flat, idx), idx

    def _sampled(self, mag, n, k):
        m, rank = self.sample_plan(n)
        pick = self._generator().uniform([m], 0, n, dtype=tf.int64)
        threshold = tf.reduce_min(tf.math.top_k(tf.gather(mag, pick), rank, sorted=False).values)
        cand = tf.reshape(tf.where(mag >= threshold), [-1])

        def among_candidates():
            return tf.gather(cand, _top(tf.gather(mag, cand), k))
        # An unlucky sample (fewer than k candidates): the exact top-k keeps the count at k.
        return tf.cond(tf.size(cand) >= k, among_candidates, lambda: _top(mag, k))

    def feedback(self, tensor, residual):
        """acc = residual + tensor (flat); select from acc; residual = acc - sent. Returns
        (values, flat indices). residual None: no feedback. A float32/float64 residual on the
        CPU selects in C (one fused pass instead of TensorFlow's add, abs, compare, gather and
        scatter; indices in increasing order, zeros never sent)."""
        flat = tf.reshape(tensor, [-1])
        if residual is None:
            return self.select(flat)
        if self._native_ok(flat, residual):
            return self._native(flat, residual)
        acc = residual + tf.cast(flat, residual.dtype)
        values, idx = self.select(acc)
        residual.assign(tf.tensor_scatter_nd_update(acc, tf.expand_dims(idx, 1),
                                                    tf.zeros_like(values)))
        return values, idx

    @staticmethod
    def _native_ok(flat, residual):
        return (residual.dtype in _NATIVE and flat.dtype == residual.dtype and
                "GPU" not in (residual.device or "").upper() and
                "GPU" not in (getattr(flat, "device", "") or "").upper() and
                flat.shape.num_elements() is not None and _lib.has("hvds_topk_feedback"))

    def _native(self, flat, residual):
        """feedback() in C: the residual's value is copied to a host buffer that
        hvds_topk_feedback updates in place, and assigned back."""
        n = flat.shape.num_elements()
        k = self.k(n)
        ctype, npdtype = _NATIVE[residual.dtype], residual.dtype.as_numpy_dtype

        def body(acc, grad):
            acc = np.array(acc, dtype=npdtype, copy=True)  # writable, contiguous
            grad = np.ascontiguousarray(grad, dtype=npdtype)
            idx, vals = np.empty(k, np.int64), np.empty(k, npdtype)
            count = self.native_feedback(acc.ctypes.data, grad.ctypes.data, ctype, n,
                                         idx.ctypes.data, _lib.INT64, vals.ctypes.data)
            return acc, vals[:count], idx[:count]

        acc, values, idx = tf.numpy_function(body, [residual.read_value(), flat],
                                             [residual.dtype, residual.dtype, tf.int64],
                                             stateful=True)
        acc.set_shape([n])
        values.set_shape([None])
        idx.set_shape([None])
        residual.assign(acc)
        return values, idx

    def compress(self, tensor, residual=None):
        """(tf.IndexedSlices over [numel] holding the top k, the tensor's shape)."""
        values, idx = self.feedback(tensor, residual)
        n = tensor.shape.num_elements()
        return tf.IndexedSlices(values, idx, dense_shape=tf.constant([n], tf.int64)), tensor.shape

    def decompress(self, slices, shape):
        """The dense tensor of `shape` for a 1-D tf.IndexedSlices (or dense) result."""
        if isinstance(slices, tf.IndexedSlices):
            n = shape.num_elements()
            dense = tf.scatter_nd(tf.expand_dims(tf.cast(slices.indices, tf.int64), 1),
                                  slices.values, [n])
            return tf.reshape(dense, shape)
        return tf.reshape(slices, shape)


def _top(mag, k):
    return tf.cast(tf.math.top_k(mag, k, sorted=False).indices, tf.int64)


def allreduce_gradients(compressor, grads, sources, reduce_rest, op, gradient_predivide_factor,
                        process_set, sparse_algorithm, quantize_bits=0, **rest):
    """Top-k with error feedback for the dense gradients of at least min_numel elements (and a
    static shape); reduce_rest(grads with those set to None, ...) reduces the others as usual.
    quantize_bits: the width of the sparse allreduce's quantized gather (0: full precision).
    Returns the list of reduced gradients."""
    grads = list(grads)
    sources = list(sources) if sources is not None else [None] * len(grads)
    chosen = [i for i, g in enumerate(grads)
              if g is not None and not isinstance(g, tf.IndexedSlices) and
              g.shape.num_elements() is not None and compressor.applies(g.shape.num_elements())]
    rest_grads = [None if i in set(chosen) else g for i, g in enumerate(grads)]
    out = reduce_rest(rest_grads, sources, op=op,
                      gradient_predivide_factor=gradient_predivide_factor,
                      process_set=process_set, sparse_algorithm=sparse_algorithm, **rest)
    if not chosen:
        return out
    if op not in (Average, Sum):
        raise NotImplementedError("Compression.topk supports op Average or Sum only")
    slices = []
    for i in chosen:
        g = tf.convert_to_tensor(grads[i])
        res = compressor.residual_for(_key(sources[i], i), g.shape, g.dtype)
        slices.append(compressor.compress(g, res)[0])
    if process_set.size() == 1 and gradient_predivide_factor == 1.0:
        reduced = slices  # nothing to exchange; Average and Sum agree
    else:
        pre, post = predivide_scales(op, gradient_predivide_factor)
        reduced = sparse_allreduce_many(slices, [None] * len(slices), op, pre, post,
                                        process_set, sparse_algorithm, quantize_bits)
    for i, r in zip(chosen, reduced):
        out[i] = compressor.decompress(r, grads[i].shape)
    return out
