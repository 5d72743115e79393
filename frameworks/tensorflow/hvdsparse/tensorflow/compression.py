"""Gradient compression on the wire: Compression.none, fp16, bf16 and topk."""
import tensorflow as tf

from hvdsparse.common.compression import Compressor, NoneCompressor, cast_compressor  # noqa: F401


def _is_floating(t):
    return t.dtype.is_floating


class FP16Compressor(cast_compressor(tf.float16, _is_floating, tf.cast)):
    """Floating-point tensors travel as float16 and come back in their own dtype."""


class BF16Compressor(cast_compressor(tf.bfloat16, _is_floating, tf.cast)):
    """Floating-point tensors travel as bfloat16 (an hvdsparse addition)."""


class Compression:
    """The compressors, as Horovod names them."""
    none = NoneCompressor
    fp16 = FP16Compressor
    bf16 = BF16Compressor

    @staticmethod
    def topk(ratio, **options):
        """Top-k sparsification with error feedback: a tf.Module holding the residual variables
        (one instance per optimizer or tape). See hvdsparse.tensorflow.topk."""
        from hvdsparse.tensorflow.topk import TopKCompressor
        return TopKCompressor(ratio, **options)
