"""Compression.topk(ratio): what the torch and TensorFlow top-k compressors share.

Per tensor, each step: acc = residual + gradient; send the k = ceil(ratio * numel) entries of
acc largest in magnitude as a sparse tensor (flat element indices); residual = acc - sent (error
feedback: nothing is dropped, only delayed). The DistributedOptimizer / DistributedGradientTape
hand the selection to the sparse allreduce and write the averaged dense result back.

Selection: exact below `sampled_above` elements; above it a sampled threshold, as ZEN and DGC
do: in a random sample of m = max(1024, sample_ratio * n) elements, where e = k m / n top-k
entries are expected, the magnitude of rank ceil(oversample * e + margin * sqrt(e)) + 1 is the
threshold, every element at or above it is a candidate, and an exact top-k among the candidates
picks k. With the oversampling and the margin (standard deviations of the sample's count) the
candidates hold the true top k almost always, so the result is the exact top-k at the cost of one
pass over the tensor and a top-k over about 1.5 k candidates; when the sample was unlucky (fewer
than k candidates) the exact top-k over the whole tensor is the fallback. `fallbacks` counts
those. CPU float32/float64 tensors select in C (hvds_topk_feedback: one fused pass for the sum,
the residual and the candidates), which never sends zeros (fewer than k entries when the tensor
has fewer non-zeros); elsewhere the framework's own top-k does it and sends exactly k.
"""
import ctypes
import math

from hvdsparse.common import _lib
from hvdsparse.common.compression import Compressor

MIN_SAMPLE = 1024
_GOLDEN = 0x9E3779B97F4A7C15


class TopKCompressorBase(Compressor):
    """A top-k compressor: an instance (Compression.topk(ratio, ...)), not a class, since it
    carries its options. sparse = True tells the optimizers to take the sparse path.

    ratio: fraction of each tensor's elements sent, in (0, 1]. min_numel: tensors with fewer
    elements are not compressed (allreduced dense, no residual); 0 compresses every tensor.
    sampled_above: tensors of at least this many elements use the sampled threshold (None:
    always exact). sample_ratio: the sample's size; oversample, margin: how far below the k-th
    largest the threshold is aimed (a factor on the expected count, plus standard deviations).
    seed: the sampling RNG's seed (the result does not depend on it unless a fallback is
    needed)."""

    sparse = True

    def __init__(self, ratio, min_numel=0, sampled_above=65536, sample_ratio=0.01,
                 oversample=1.5, seed=0, margin=3.0):
        if not isinstance(ratio, (int, float)) or not 0 < ratio <= 1:
            raise ValueError("Compression.topk: ratio must be in (0, 1], not %r" % (ratio,))
        if not 0 < sample_ratio <= 1:
            raise ValueError("Compression.topk: sample_ratio must be in (0, 1], not %r"
                             % (sample_ratio,))
        if oversample < 1:
            raise ValueError("Compression.topk: oversample must be >= 1, not %r" % (oversample,))
        if margin < 0:
            raise ValueError("Compression.topk: margin must be >= 0, not %r" % (margin,))
        if int(min_numel) < 0:
            raise ValueError("Compression.topk: min_numel must be >= 0")
        self.ratio = float(ratio)
        self.min_numel = int(min_numel)
        self.sampled_above = None if sampled_above is None else int(sampled_above)
        self.sample_ratio = float(sample_ratio)
        self.oversample = float(oversample)
        self.margin = float(margin)
        self.seed = int(seed)
        self.fallbacks = 0  # sampled selections that needed the exact fallback
        self._calls = 0  # native selections so far: each draws its sample with its own seed

    def __repr__(self):
        return "Compression.topk(%g, min_numel=%d)" % (self.ratio, self.min_numel)

    def applies(self, numel):
        """True when a tensor of numel elements is compressed."""
        return numel > 0 and numel >= self.min_numel

    def k(self, numel):
        """Entries sent for a tensor of numel elements: ceil(ratio * numel), at least 1."""
        return min(numel, max(1, int(math.ceil(self.ratio * numel))))

    def sampled(self, numel):
        """True when the sampled threshold is used for numel elements."""
        return (self.sampled_above is not None and numel >= self.sampled_above and
                self.k(numel) < numel)

    def sample_plan(self, numel):
        """(m, rank): the sample size and the sample rank whose magnitude is the threshold."""
        m = min(numel, max(MIN_SAMPLE, int(math.ceil(self.sample_ratio * numel))))
        expected = self.k(numel) * m / numel
        rank = int(math.ceil(self.oversample * expected + self.margin * math.sqrt(expected))) + 1
        return m, min(m, rank)

    def native_feedback(self, acc, grad, dtype, n, indices, index_dtype, values):
        """Error feedback and selection in C (hvds_topk_feedback) on host buffers given by
        address: acc (n elements of the C dtype, updated in place to acc + grad - sent), grad (or
        None), and room for k indices (index_dtype) and k values. Returns how many were
        selected (at most k: zeros are never sent); counts a sampled selection that fell back
        to the exact one in `fallbacks`."""
        k = self.k(n)
        m, rank = self.sample_plan(n) if self.sampled(n) else (0, 0)
        self._calls += 1
        plan = _lib.TopKPlan(k, m, rank, (self.seed * _GOLDEN + self._calls) % (1 << 64))
        count, exact = ctypes.c_int64(0), ctypes.c_int32(0)
        rc = _lib.lib().hvds_topk_feedback(acc, grad, dtype, n, ctypes.byref(plan), indices,
                                           index_dtype, values, ctypes.byref(count),
                                           ctypes.byref(exact))
        if rc != _lib.SUCCESS:
            raise RuntimeError("hvdsparse: top-k selection failed: %s" % _lib.last_error())
        if m and exact.value:
            self.fallbacks += 1
        return count.value


def is_topk(compression):
    """True for a Compression.topk(...) compressor (it takes the sparse path)."""
    return isinstance(compression, TopKCompressorBase)


def quant_bits_supported():
    """True when the C API's options carry sparse_quant_bits (hvds_op_options_t)."""
    return any(name == "sparse_quant_bits" for name, _ in _lib.OpOptions._fields_)


def check_quantize_bits(bits):
    """bits (0, 2, 4 or 8), or the error saying why it cannot be used."""
    if bits not in (0, 2, 4, 8):
        raise ValueError("quantize_bits must be 0, 2, 4 or 8, not %r" % (bits,))
    if bits and not quant_bits_supported():
        raise NotImplementedError(
            "quantize_bits=%d needs hvds_op_options_t.sparse_quant_bits in the C API, which "
            "this build of libhvdsparse does not have yet (docs/compression.md)" % bits)
    return bits
