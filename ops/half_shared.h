/* The 16-bit float conversions, written once for host and device (hvds_hostdev.h): ops/reduce.c
 * (hvds__half_to_float, hvds__float_to_half, hvds__bf16_to_float, hvds__float_to_bf16) and the
 * CUDA kernels both use these, NaN payloads and rounding (to nearest even) included, so a GPU
 * cast, reduce or scale gives the bytes the CPU gives. The CUDA intrinsics (__float2half_rn) are
 * not used: they canonicalize NaNs differently. test/ops/ checks every half and bfloat16 value.
 */
#ifndef HVDS_HALF_SHARED_H_
#define HVDS_HALF_SHARED_H_

#include "hvds_hostdev.h"

/* IEEE binary16: 1 sign bit, 5 exponent bits (bias 15), 10 mantissa bits. */
HVDS_HD float hvds_hd_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24 is exact in float32.
    float mag = (float)mant * 5.9604644775390625e-8f;
    return hvds_hd_bits_f32(sign | hvds_hd_f32_bits(mag));
  }
  if (exp == 31) return hvds_hd_bits_f32(sign | 0x7f800000u | (mant << 13));  // Inf, NaN
  return hvds_hd_bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));        // rebias 15 -> 127
}

HVDS_HD uint16_t hvds_hd_float_to_half(float f) {
  uint32_t x = hvds_hd_f32_bits(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  uint32_t mag = x & 0x7fffffffu;
  if (mag > 0x7f800000u)  // NaN: keep the top payload bits, force the quiet bit
    return (uint16_t)(sign | 0x7e00u | ((mag >> 13) & 0x3ffu));
  if (mag >= 0x477ff000u)  // >= 65520 rounds (ties to even) past 65504: Inf
    return (uint16_t)(sign | 0x7c00u);
  if (mag < 0x38800000u) {
    // Below 2^-14: a subnormal half; adding 0.5 rounds the 2^-24 units to nearest even.
    float sum = hvds_hd_bits_f32(mag) + 0.5f;
    return (uint16_t)(sign | (hvds_hd_f32_bits(sum) - 0x3f000000u));
  }
  // Normal: rebias the exponent, round the 13 dropped bits to nearest even (a carry out of the
  // mantissa bumps the exponent).
  uint32_t lsb = (mag >> 13) & 1u;
  mag = mag - (112u << 23) + 0xfffu + lsb;
  return (uint16_t)(sign | (mag >> 13));
}

HVDS_HD float hvds_hd_bf16_to_float(uint16_t b) { return hvds_hd_bits_f32((uint32_t)b << 16); }

HVDS_HD uint16_t hvds_hd_float_to_bf16(float f) {
  uint32_t x = hvds_hd_f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);  // quiet NaN
  // Round to nearest even on the 16 dropped bits; overflow carries into Inf.
  uint32_t lsb = (x >> 16) & 1u;
  return (uint16_t)((x + 0x7fffu + lsb) >> 16);
}

#endif /* HVDS_HALF_SHARED_H_ */
