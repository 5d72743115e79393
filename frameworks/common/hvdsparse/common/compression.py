"""What every framework's Compression shares: the compressor protocol, the no-op compressor, a
cast compressor built from the framework's own "is floating" test and cast, and the Compression
namespace itself."""


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


def cast_compressor(wire_dtype, is_floating, cast, name="CastCompressor"):
    """A compressor class, called name, sending floating-point tensors as wire_dtype and
    restoring their dtype. is_floating(tensor) -> bool and cast(tensor, dtype) -> tensor come
    from the framework."""

    class _Cast(Compressor):
        @staticmethod
        def compress(tensor):
            if is_floating(tensor) and tensor.dtype != wire_dtype:
                return cast(tensor, wire_dtype), tensor.dtype
            return tensor, None

        @staticmethod
        def decompress(tensor, ctx):
            return tensor if ctx is None else cast(tensor, ctx)
    _Cast.__name__ = _Cast.__qualname__ = name
    return _Cast


def compression_namespace(float16, bfloat16, is_floating, cast, topk):
    """Horovod's Compression for one framework: none, fp16 and bf16 (floating-point tensors
    travel as float16 or bfloat16 and come back in their own dtype; bf16 is an hvdsparse
    addition), and topk(ratio, **options), which makes the framework's top-k compressor."""

    class Compression:
        none = NoneCompressor
        fp16 = cast_compressor(float16, is_floating, cast, "FP16Compressor")
        bf16 = cast_compressor(bfloat16, is_floating, cast, "BF16Compressor")

        @staticmethod
        def topk(ratio, **options):
            """Top-k sparsification with error feedback: an instance per optimizer or tape (it
            carries the options; docs/compression.md)."""
            return topk(ratio, **options)
    return Compression
