"""Gradient compression on the wire: Compression.none, fp16, bf16 and topk (an instance per
optimizer: it carries the options, the residuals live in the optimizer; see topk.py)."""
import torch

from hvdsparse.common.compression import (Compressor, NoneCompressor,  # noqa: F401
                                          compression_namespace)
from hvdsparse.torch.topk import TopKCompressor


def _is_floating(t):
    return t.dtype.is_floating_point


def _cast(t, dtype):
    return t.type(dtype)


Compression = compression_namespace(torch.float16, torch.bfloat16, _is_floating, _cast,
                                    TopKCompressor)
FP16Compressor, BF16Compressor = Compression.fp16, Compression.bf16
