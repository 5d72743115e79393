/* The per-value arithmetic of ops/quantize.c for host and device (hvds_hostdev.h), so that the
 * GPU encoder (cuda/quantize.cu) writes the CPU encoder's bytes: the bucket's max |v| and float32
 * scale, the stochastic level with its splitmix64 draw, the code, four codes packed into the
 * bytes they fill, and the decoded value.
 *
 * As in ops/quantize.c, everything is done in double: t = |v| * (s / S), a snap to the nearest
 * level within s * 2^-20, else floor(t + u). The multiplication is rounded on its own on the
 * device (__dmul_rn): nvcc would otherwise fuse it with the following addition into one fma,
 * which rounds once instead of twice and can change a level. (The draw's scaling by 2^-53 may be
 * fused into t + u: that product is exact, so the sum rounds the same.) test/cuda_host/ checks an
 * encoder and decoder built from these functions against hvds__quant_encode() and
 * hvds__quant_decode() byte for byte; test/gpu/ runs the kernels.
 */
#ifndef HVDS_CUDA_QUANT_SHARED_H_
#define HVDS_CUDA_QUANT_SHARED_H_

#include <float.h>
#include <math.h>

#include "hvds_hostdev.h"

#define HVDS_HD_QUANT_SNAP 0x1p-20 /* t within s * SNAP of an integer is on the grid */

/* splitmix64's output number i + 1 for state seed, as a double in [0, 1). */
HVDS_HD double hvds_hd_quant_draw(uint64_t seed, uint64_t i) {
  return (double)(hvds_hd_mix64(seed + (i + 1) * 0x9e3779b97f4a7c15ULL) >> 11) * 0x1p-53;
}

/* The running max |v| of a bucket after v: NaN from the first NaN on (ops/quantize.c's loop).
 * Order-independent, so it also combines two partial maxima (v >= 0 or NaN). */
HVDS_HD double hvds_hd_quant_absmax(double mx, double v) {
  double a = fabs(v);
  return (a <= mx || mx != mx) ? mx : a;
}

/* The bucket's scale from its max |v|: the smallest float32 >= mx, or NaN (C's NAN, bits
 * 0x7fc00000) when mx is NaN, infinite or past the float32 range. */
HVDS_HD float hvds_hd_quant_scale(double mx) {
  if (!(mx <= (double)FLT_MAX)) return hvds_hd_bits_f32(0x7fc00000u);
  float sf = (float)mx;
  // nextafterf(sf, INFINITY) for a finite sf >= 0: the next bit pattern.
  if ((double)sf < mx) sf = hvds_hd_bits_f32(hvds_hd_f32_bits(sf) + 1u);
  return sf;
}

/* s / scale, or 0 for a zero or NaN scale (whose values all get level 0). */
HVDS_HD double hvds_hd_quant_inv(float scale, int s) { return scale > 0 ? (double)s / scale : 0; }

/* a * b rounded by itself (never fused into a later addition). */
HVDS_HD double hvds_hd_quant_mul(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

/* The level of a = |v| (value number i of the call): the nearest when t = a * inv is within
 * s * SNAP of it, else floor(t + u); at most s. */
HVDS_HD uint32_t hvds_hd_quant_level(double a, int s, double inv, uint64_t seed, uint64_t i) {
  double t = hvds_hd_quant_mul(a, inv);
  uint32_t r = (uint32_t)(t + 0.5);
  uint32_t l =
      fabs(t - r) <= s * HVDS_HD_QUANT_SNAP ? r : (uint32_t)(t + hvds_hd_quant_draw(seed, i));
  return l > (uint32_t)s ? (uint32_t)s : l;
}

/* The code of value v (number i of the call) in a bucket of scale S: s + l for v >= 0, s - l
 * for v < 0; level 0 (code s) in a zero or NaN bucket. */
HVDS_HD uint32_t hvds_hd_quant_code(double v, float scale, int s, double inv, uint64_t seed,
                                    uint64_t i) {
  uint32_t l = scale > 0 ? hvds_hd_quant_level(fabs(v), s, inv, seed, i) : 0;
  return v < 0 ? (uint32_t)s - l : (uint32_t)s + l;
}

/* Codes c[0..3] of values 4q..4q+3 as the bits / 2 bytes they fill, byte j being bits 8j.. of
 * the result (codes packed from the low bit of each byte up). */
HVDS_HD uint32_t hvds_hd_quant_pack4(const uint32_t c[4], int bits) {
  return c[0] | c[1] << bits | c[2] << (2 * bits) | c[3] << (3 * bits);
}

/* Code j (0..3) out of such a group. */
HVDS_HD uint32_t hvds_hd_quant_unpack(uint32_t group, int j, int bits) {
  return (group >> (j * bits)) & ((1u << bits) - 1);
}

/* The decoded value of a code: (code - s) * S / s (the top level gives back S exactly). */
HVDS_HD double hvds_hd_quant_value(uint32_t code, int s, float scale) {
  return (double)((int)code - s) * scale / s;
}

#endif /* HVDS_CUDA_QUANT_SHARED_H_ */
