"""Which rank owns each index in the split sparse allreduces, computed with torch operations so
that it runs where the indices are (on the GPU for a CUDA gradient), with the runtime's own rules:

- ssar_split_allgather and dsar_split_allgather cut [0, n) into P equal ranges: rank j owns
  [floor(j n / P), floor((j + 1) n / P)) (ops/sparse/sparse_stream.c);
- zen hashes each index with the job's keyed permutation of [0, n) (ops/sparse/zen_hash.h: a
  4-round Feistel network over the smallest even number of bits covering n, round keys from
  splitmix64, walked in cycles back into [0, n)) and cuts the hashed positions the same way, so
  skewed indices spread evenly; the key is the runtime's (hvds_zen_key), so an index has the
  same owner here as in the runtime's ZEN.

int64 arithmetic wraps in torch as in C's uint64_t; right shifts are made logical by a mask.
Indices must lie in [0, n) with n below 2^62."""
import torch

_GOLDEN = 0x9E3779B97F4A7C15
_MIX1 = 0xBF58476D1CE4E5B9
_MIX2 = 0x94D049BB133111EB
_U64 = (1 << 64) - 1


def _signed(u):
    """A uint64 as the int64 with the same bits."""
    return u - (1 << 64) if u >= 1 << 63 else u


def _mix64_int(z):
    """splitmix64's finalizer on a Python int (the round keys)."""
    z = ((z ^ (z >> 30)) * _MIX1) & _U64
    z = ((z ^ (z >> 27)) * _MIX2) & _U64
    return z ^ (z >> 31)


def _shr(x, s):
    """Logical right shift of int64 x by s bits."""
    return (x >> s) & ((1 << (64 - s)) - 1)


def _mix64(z):
    """splitmix64's finalizer on an int64 tensor (bits as uint64)."""
    z = (z ^ _shr(z, 30)) * _signed(_MIX1)
    z = (z ^ _shr(z, 27)) * _signed(_MIX2)
    return z ^ _shr(z, 31)


class ZenHash:
    """The keyed permutation of [0, dim) (hvds__zen_hash_init / hvds__zen_hash)."""

    def __init__(self, dim, key):
        bits = 0
        while bits < 64 and (1 << bits) < dim:
            bits += 1
        self.dim = dim
        self.half = (bits + 1) // 2
        self.mask = (1 << self.half) - 1
        keys, s = [], key
        for _ in range(4):
            s = (s + _GOLDEN) & _U64
            keys.append(_signed(_mix64_int(s)))
        self.keys = keys

    def _feistel(self, x):
        left, right = x >> self.half, x & self.mask
        for k in self.keys:
            left, right = right, left ^ (_mix64(right ^ k) & self.mask)
        return (left << self.half) | right

    def __call__(self, x):
        """The hashed positions of int64 tensor x (every value in [0, dim))."""
        y = self._feistel(x)
        outside = y >= self.dim
        while bool(outside.any()):
            y = torch.where(outside, self._feistel(y), y)
            outside = y >= self.dim
        return y


def range_owner(positions, dim, parts):
    """The j with floor(j dim / parts) <= position < floor((j + 1) dim / parts)."""
    return torch.div((positions + 1) * parts - 1, dim, rounding_mode="floor")


def owners(indices, dim, parts, algorithm, zen_key):
    """Owner (int64, 0 <= owner < parts) of each index for algorithm ("zen" hashes first)."""
    positions = indices.to(torch.int64)
    if algorithm == "zen":
        positions = ZenHash(dim, zen_key)(positions)
    return range_owner(positions, dim, parts)
