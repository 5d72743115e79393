"""Gradient compression on the wire: Compression.none, fp16, bf16 and topk."""
import torch

from hvdsparse.common.compression import Compressor, NoneCompressor, cast_compressor  # noqa: F401
from hvdsparse.torch.topk import TopKCompressor


def _is_floating(t):
    return t.dtype.is_floating_point


def _cast(t, dtype):
    return t.type(dtype)


class FP16Compressor(cast_compressor(torch.float16, _is_floating, _cast)):
    """Floating-point tensors travel as float16 and come back in their own dtype."""


class BF16Compressor(cast_compressor(torch.bfloat16, _is_floating, _cast)):
    """Floating-point tensors travel as bfloat16 (Horovod has no bf16 compressor; we do)."""


class Compression:
    """The compressors, as Horovod names them."""
    none = NoneCompressor
    fp16 = FP16Compressor
    bf16 = BF16Compressor

    @staticmethod
    def topk(ratio, **options):
        """Top-k sparsification with error feedback: an instance per optimizer (it carries the
        options; the residuals live in the optimizer). See hvdsparse.torch.topk."""
        return TopKCompressor(ratio, **options)
