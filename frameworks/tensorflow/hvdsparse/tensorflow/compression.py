"""Gradient compression on the wire: Compression.none, fp16 and bf16."""
import tensorflow as tf


class Compressor:
    """compress(tensor) -> (tensor to send, context); decompress(tensor, context) -> tensor."""

    @staticmethod
    def compress(tensor):
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError


class NoneCompressor(Compressor):
    """Sends tensors as they are."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


def _cast_compressor(wire_dtype):
    class _Cast(Compressor):
        @staticmethod
        def compress(tensor):
            if tensor.dtype.is_floating and tensor.dtype != wire_dtype:
                return tf.cast(tensor, wire_dtype), tensor.dtype
            return tensor, None

        @staticmethod
        def decompress(tensor, ctx):
            return tensor if ctx is None else tf.cast(tensor, ctx)
    return _Cast


class FP16Compressor(_cast_compressor(tf.float16)):
    """Floating-point tensors travel as float16 and come back in their own dtype."""


class BF16Compressor(_cast_compressor(tf.bfloat16)):
    """Floating-point tensors travel as bfloat16 (an hvdsparse addition)."""


class Compression:
    """The compressors, as Horovod names them."""
    none = NoneCompressor
    fp16 = FP16Compressor
    bf16 = BF16Compressor
