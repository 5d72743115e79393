"""Stochastic bucket quantization (SparCML section 4): a numpy reference of ops/quantize.c.

The runtime quantizes DSAR's dense allgather in C (DistributedOptimizer(quantize_bits=...));
this module gives the same bytes for the same (values, bits, seed), for tests and for modelling
quantization in a single-process reference. The scheme, as in ops/quantize.h:

  buckets of BUCKET = 1024 values, one float32 scale S = max |v| each (rounded up to a float32);
  s = 2^(bits-1) - 1 levels per sign; t = |v| * (s / S); l = floor(t + u), u ~ U[0, 1) from
  splitmix64 (output number i + 1 for value i), except that t within s * 2^-20 of an integer is
  taken as that integer (values on the grid round-trip exactly); the code is s + l (v >= 0) or
  s - l (v < 0), packed low bit first; decode is (code - s) * S / s, in float64, then the dtype.

E[decode(encode(v))] = v (up to the snap, at most S * 2^-20) and |v - q(v)| < S / s.
"""
import numpy as np

BUCKET = 1024
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_SNAP = 2.0 ** -20


def levels(bits):
    """s = 2^(bits-1) - 1 for bits 2, 4 or 8; ValueError otherwise."""
    if bits not in (2, 4, 8):
        raise ValueError("quantization width must be 2, 4 or 8 bits, not %r" % (bits,))
    return (1 << (bits - 1)) - 1


def encoded_bytes(n, bits):
    """Size of the encoding of n values: scales, packed codes, zero padding to 8 bytes."""
    levels(bits)
    if n == 0:
        return 0
    nb = -(-n // BUCKET)
    return (nb * 4 + (n * bits + 7) // 8 + 7) & ~7


def _mix(z):
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def draws(seed, first, n):
    """The uniform draws in [0, 1) of values first .. first + n - 1 for seed."""
    i = np.arange(first + 1, first + n + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        state = np.uint64(seed) + i * _GOLDEN
    return (_mix(state) >> np.uint64(11)).astype(np.float64) * 2.0 ** -53


def seed_for(key, tag, block):
    """ops/quantize.c hvds__quant_seed: the seed of one encoded block."""
    with np.errstate(over="ignore"):
        a = _mix(np.array([np.uint64(key) ^ (np.uint64(tag) * _GOLDEN)], dtype=np.uint64))
        b = a + np.uint64(block + 1) * _GOLDEN
    return int(_mix(b)[0])


def _scales(v):
    """Per-bucket float32 scale, rounded up; NaN for a bucket with a NaN or an infinity."""
    n = v.size
    nb = -(-n // BUCKET)
    pad = np.zeros(nb * BUCKET)
    pad[:n] = np.abs(v)
    mx = pad.reshape(nb, BUCKET).max(axis=1)  # NaN propagates
    bad = ~np.isfinite(mx) | (mx > np.finfo(np.float32).max)
    sf = mx.astype(np.float32)
    up = sf.astype(np.float64) < mx
    sf[up] = np.nextafter(sf[up], np.float32(np.inf))
    sf[bad] = np.float32(np.nan)
    return sf


def levels_of(values, bits, seed):
    """(scales float32 [buckets], signed levels int32 [n]) of a 1-D array."""
    s = levels(bits)
    v = np.asarray(values).astype(np.float64).reshape(-1)
    scales = _scales(v)
    per = np.repeat(scales.astype(np.float64), BUCKET)[:v.size]
    a = np.abs(v)
    ok = per > 0  # False for NaN scales and zero buckets: level 0
    with np.errstate(invalid="ignore", divide="ignore"):
        t = np.where(ok, a * (s / np.where(ok, per, 1.0)), 0.0)
    r = np.floor(t + 0.5)
    lv = np.where(np.abs(t - r) <= s * _SNAP, r, np.floor(t + draws(seed, 0, v.size)))
    lv = np.clip(lv, 0, s).astype(np.int32)
    lv[~ok] = 0
    return scales, np.where(v < 0, -lv, lv).astype(np.int32)


def encode(values, bits, seed):
    """The encoded bytes (numpy uint8) of a 1-D float array, as hvds__quant_encode writes them."""
    s = levels(bits)
    v = np.asarray(values).reshape(-1)
    n = v.size
    out = np.zeros(encoded_bytes(n, bits), dtype=np.uint8)
    if n == 0:
        return out
    scales, lv = levels_of(v, bits, seed)
    nb = scales.size
    out[:nb * 4] = np.frombuffer(scales.astype("<f4").tobytes(), dtype=np.uint8)
    codes = (lv + s).astype(np.uint32)
    bit = np.arange(n, dtype=np.int64) * bits
    packed = np.zeros((n * bits + 7) // 8, dtype=np.uint32)
    np.add.at(packed, bit // 8, codes << (bit % 8).astype(np.uint32))
    out[nb * 4:nb * 4 + packed.size] = packed.astype(np.uint8)
    return out


def decode(data, n, bits, dtype=np.float32):
    """n values of dtype from the bytes encode() produced."""
    s = levels(bits)
    if n == 0:
        return np.zeros(0, dtype=dtype)
    data = np.asarray(data, dtype=np.uint8)
    nb = -(-n // BUCKET)
    scales = np.frombuffer(data[:nb * 4].tobytes(), dtype="<f4").astype(np.float64)
    bit = np.arange(n, dtype=np.int64) * bits
    codes = (data[nb * 4 + bit // 8].astype(np.int64) >> (bit % 8)) & ((1 << bits) - 1)
    per = np.repeat(scales, BUCKET)[:n]
    return ((codes - s).astype(np.float64) * per / s).astype(dtype)


def quantize(values, bits, seed):
    """decode(encode(values)) in the values' dtype and shape."""
    v = np.asarray(values)
    return decode(encode(v, bits, seed), v.size, bits, v.dtype).reshape(v.shape)


def error_bound(values, bits):
    """Per value, the largest |v - q(v)|: its bucket's scale / s."""
    s = levels(bits)
    v = np.asarray(values).astype(np.float64).reshape(-1)
    return np.repeat(_scales(v).astype(np.float64), BUCKET)[:v.size] / s
