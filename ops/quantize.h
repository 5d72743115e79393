/* Stochastic quantization of float vectors (SparCML section 4; QSGD-style, max-norm buckets).
 *
 * A vector of n values is cut into buckets of HVDS_QUANT_BUCKET values (the last may be shorter).
 * Each bucket keeps one float32 scale S = max |v| and one code per value of `bits` bits (2, 4 or
 * 8). With s = 2^(bits-1) - 1 levels per sign, a value v becomes sign(v) * l * S / s where
 *   t = |v| * (s / S),   l = floor(t + u),   u ~ U[0, 1) from a seeded counter-based RNG,
 * so E[l] = t: the decoded value is unbiased, and |v - q(v)| < S / s. The code stored is l + s
 * for v >= 0 and s - l for v < 0, in [0, 2s]. A value within S * 2^-20 of a level (t within
 * s * 2^-20 of an integer) is taken as that level without a draw: values already on the grid
 * round-trip bit for bit (float32, float64), at the price of a bias of at most S * 2^-20.
 *
 * Encoded layout (hvds__quant_bytes() bytes, the same on every host of one byte order):
 *   [ceil(n / 1024) float32 scales][ceil(n * bits / 8) code bytes, codes packed from the low bit
 *   of each byte up][zero padding to a multiple of 8 bytes].
 * A bucket holding a NaN or an infinity stores a NaN scale and decodes to NaN throughout (a
 * broken gradient stays visibly broken). float64 values beyond the float32 range do the same.
 *
 * The random draw for value i of a call is splitmix64's output number i + 1 for state `seed`, so
 * the codes depend only on (values, bits, seed): encoding is reproducible and decoding is
 * deterministic, which is what lets every rank hold the same decoded vector.
 * frameworks/common/hvdsparse/common/quantize.py is a numpy reference that gives the same bytes.
 */
#ifndef HVDS_QUANTIZE_H_
#define HVDS_QUANTIZE_H_

#include <stddef.h>
#include <stdint.h>

#include "hvdsparse.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HVDS_QUANT_BUCKET 1024

/* Levels per sign, s = 2^(bits-1) - 1, for bits 2, 4 or 8; 0 for any other width. */
int hvds__quant_levels(int bits);

/* 1 for the dtypes that can be quantized: float16, bfloat16, float32, float64. */
int hvds__quant_dtype_ok(hvds_dtype_t dtype);

/* Encoded bytes of n values at `bits` (a multiple of 8; 0 for n == 0 or an unsupported width). */
size_t hvds__quant_bytes(size_t n, int bits);

/* Encodes n values of dtype at src into dst (hvds__quant_bytes(n, bits) bytes, every byte
 * written). Returns HVDS_INVALID_ARGUMENT for an unsupported width or dtype, with nothing
 * written. src and dst must not overlap. Thread-safe (no shared state). */
hvds_result_t hvds__quant_encode(const void* src, size_t n, hvds_dtype_t dtype, int bits,
                                 uint64_t seed, void* dst /* OUT */);

/* Decodes n values encoded at `bits` from src into dst as dtype (the decoded values rounded to
 * dtype). Returns HVDS_INVALID_ARGUMENT for an unsupported width or dtype, with nothing written.
 * Deterministic: the same bytes decode to the same values everywhere. */
hvds_result_t hvds__quant_decode(const void* src, size_t n, int bits, hvds_dtype_t dtype,
                                 void* dst /* OUT */);

/* A seed for one encoded block from a key shared by every rank, the operation's tag and the
 * block's index (splitmix64 of their mix): different for every block and every operation. */
uint64_t hvds__quant_seed(uint64_t key, uint64_t tag, uint64_t block);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_QUANTIZE_H_ */
