"""Gradient compression on the wire: Compression.none, fp16, bf16 and topk (a tf.Module holding
the residual variables, one instance per optimizer or tape; see topk.py)."""
import tensorflow as tf

from hvdsparse.common.compression import (Compressor, NoneCompressor,  # noqa: F401
                                          compression_namespace)
from hvdsparse.tensorflow.topk import TopKCompressor


def _is_floating(t):
    return t.dtype.is_floating


def _topk(ratio, **options):
    return TopKCompressor(ratio, **options)


Compression = compression_namespace(tf.float16, tf.bfloat16, _is_floating, tf.cast, _topk)
FP16Compressor, BF16Compressor = Compression.fp16, Compression.bf16
