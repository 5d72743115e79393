"""What every framework's Compression shares: the compressor protocol, the no-op compressor, and
a cast compressor built from the framework's own "is floating" test and cast."""


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


def cast_compressor(wire_dtype, is_floating, cast):
    """A compressor sending floating-point tensors as wire_dtype and restoring their dtype.
    is_floating(tensor) -> bool and cast(tensor, dtype) -> tensor come from the framework."""

    class _Cast(Compressor):
        @staticmethod
        def compress(tensor):
            if is_floating(tensor) and tensor.dtype != wire_dtype:
                return cast(tensor, wire_dtype), tensor.dtype
            return tensor, None

        @staticmethod
        def decompress(tensor, ctx):
            return tensor if ctx is None else cast(tensor, ctx)
    return _Cast
