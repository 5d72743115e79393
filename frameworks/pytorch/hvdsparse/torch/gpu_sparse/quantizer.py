"""The runtime's stochastic quantizer (ops/quantize.h: buckets of 1024 values, a float32 scale
each, 2, 4 or 8 bits per value) on torch tensors of either device, through hvds_quantize and
hvds_dequantize: on the host for CPU tensors, by the device library's kernels on the current
stream for CUDA ones (the host does not wait). The bytes are the runtime's own, so a quantized
gather built in the binding decodes as the runtime's does."""
import torch

from hvdsparse.common import _lib
from hvdsparse.common.job_state import check
from hvdsparse.torch.handles import _TO_C


def encoded_bytes(n, bits):
    """Bytes of n values encoded at bits (a multiple of 8)."""
    return int(_lib.lib().hvds_quantized_bytes(n, bits))


def _where(t):
    """(device index or -1, the current stream of its GPU or 0)."""
    if t.is_cuda:
        return t.device.index, torch.cuda.current_stream(t.device).cuda_stream
    return -1, 0


def quantize(values, bits, seed):
    """The encoded bytes (uint8, on values' device) of 1-D values."""
    values = values.contiguous()
    n = values.numel()
    out = torch.empty(encoded_bytes(n, bits), dtype=torch.uint8, device=values.device)
    if n:
        device, stream = _where(values)
        check(_lib.lib().hvds_quantize(device, stream, values.data_ptr(), n, _TO_C[values.dtype],
                                       bits, seed, out.data_ptr()), "quantize")
    return out


def dequantize(encoded, n, bits, dtype):
    """n values of dtype decoded from encoded (uint8, contiguous), on its device."""
    out = torch.empty(n, dtype=dtype, device=encoded.device)
    if n:
        device, stream = _where(encoded)
        check(_lib.lib().hvds_dequantize(device, stream, encoded.data_ptr(), n, bits,
                                         _TO_C[dtype], out.data_ptr()), "dequantize")
    return out
