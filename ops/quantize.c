/* Stochastic bucket quantization (quantize.h): encode, decode, and the per-block seed.
 *
 * Each bucket is staged in a double array first (one dtype switch per bucket, not per value);
 * the arithmetic on a value is then t = |v| * (s / S), a snap test, one draw and a floor, all in
 * double, so the numpy reference (hvdsparse/common/quantize.py) reproduces it bit for bit. The
 * build keeps that arithmetic from fusing into FMAs (-ffp-contract=off for this file), which
 * round once where the reference rounds twice.
 */
#include "quantize.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "kernel_clones.h"
#include "reduce.h"
#include "splitmix.h"

#define SNAP 0x1p-20 /* t within s * SNAP of an integer is on the grid */

int hvds__quant_levels(int bits) {
  return bits == 2 || bits == 4 || bits == 8 ? (1 << (bits - 1)) - 1 : 0;
}

int hvds__quant_dtype_ok(hvds_dtype_t dtype) {
  return dtype == HVDS_FLOAT16 || dtype == HVDS_BFLOAT16 || dtype == HVDS_FLOAT32 ||
         dtype == HVDS_FLOAT64;
}

static size_t buckets(size_t n) { return (n + HVDS_QUANT_BUCKET - 1) / HVDS_QUANT_BUCKET; }
static size_t code_bytes(size_t n, int bits) { return (n * (size_t)bits + 7) / 8; }

size_t hvds__quant_bytes(size_t n, int bits) {
  if (n == 0 || hvds__quant_levels(bits) == 0) return 0;
  return (buckets(n) * sizeof(float) + code_bytes(n, bits) + 7) & ~(size_t)7;
}

uint64_t hvds__quant_seed(uint64_t key, uint64_t tag, uint64_t block) {
  return hvds__splitmix_at(hvds__mix64(key ^ (tag * HVDS_SPLITMIX_GOLDEN)), block);
}

/* Values [first, first + m) of src as doubles. */
static void load(const void* src, hvds_dtype_t dtype, size_t first, size_t m, double* out) {
  size_t i;
  switch (dtype) {
    case HVDS_FLOAT32:
      for (i = 0; i < m; i++) out[i] = ((const float*)src)[first + i];
      break;
    case HVDS_FLOAT64:
      for (i = 0; i < m; i++) out[i] = ((const double*)src)[first + i];
      break;
    case HVDS_FLOAT16:
      for (i = 0; i < m; i++) out[i] = hvds__half_to_float(((const uint16_t*)src)[first + i]);
      break;
    default:  // HVDS_BFLOAT16
      for (i = 0; i < m; i++) out[i] = hvds__bf16_to_float(((const uint16_t*)src)[first + i]);
      break;
  }
}

/* m doubles into dst[first, first + m) as dtype. */
static void store(const double* in, size_t first, size_t m, hvds_dtype_t dtype, void* dst) {
  size_t i;
  switch (dtype) {
    case HVDS_FLOAT32:
      for (i = 0; i < m; i++) ((float*)dst)[first + i] = (float)in[i];
      break;
    case HVDS_FLOAT64:
      for (i = 0; i < m; i++) ((double*)dst)[first + i] = in[i];
      break;
    case HVDS_FLOAT16:
      for (i = 0; i < m; i++) ((uint16_t*)dst)[first + i] = hvds__float_to_half((float)in[i]);
      break;
    default:  // HVDS_BFLOAT16
      for (i = 0; i < m; i++) ((uint16_t*)dst)[first + i] = hvds__float_to_bf16((float)in[i]);
      break;
  }
}

/* The bucket's scale: max |v| as a float32 no smaller than it, or NaN when a value is NaN or
 * infinite, or the maximum does not fit a float32. Four running maxima keep the loop free of a
 * dependency on the previous value. */
static float bucket_scale(const double* v, size_t m) {
  double mx[4] = {0, 0, 0, 0};
  int bad = 0;  // a NaN or an infinity
  size_t i = 0;
  for (; i + 4 <= m; i += 4)
    for (int j = 0; j < 4; j++) {
      double a = fabs(v[i + (size_t)j]);
      bad |= !(a <= DBL_MAX);
      mx[j] = a > mx[j] ? a : mx[j];
    }
  for (; i < m; i++) {
    double a = fabs(v[i]);
    bad |= !(a <= DBL_MAX);
    mx[0] = a > mx[0] ? a : mx[0];
  }
  double top = mx[0];
  for (int j = 1; j < 4; j++) top = mx[j] > top ? mx[j] : top;
  if (bad || top > FLT_MAX) return NAN;
  float sf = (float)top;
  if ((double)sf < top) sf = nextafterf(sf, INFINITY);
  return sf;
}

/* The codes of m values of a bucket with a positive scale S (inv = s / S). Value i's level:
 * t = |v| * inv rounded to the nearest level when within s * SNAP of it (on the grid), else
 * floor(t + u) with u value first + i's draw (splitmix64's output number first + i + 1,
 * as (z >> 11) * 2^-53); at most s. Its code: s + l, or s - l for v < 0. Written without
 * branches, and the draw's 53-bit integer turned into a double exactly through its bits, so the
 * compiler vectorizes the loop (truncation is floor here: t >= 0). */
HVDS_CLONES_AVX2
static void bucket_codes(const double* restrict v, size_t m, int s, double inv, uint64_t seed,
                         uint64_t first, uint8_t* restrict code) {
  double snap = s * SNAP;
  uint64_t z0 = seed + (first + 1) * HVDS_SPLITMIX_GOLDEN;
  for (size_t i = 0; i < m; i++) {
    double t = fabs(v[i]) * inv;
    int32_t r = (int32_t)(t + 0.5);
    uint64_t x = hvds__mix64(z0 + i * HVDS_SPLITMIX_GOLDEN) >> 11;    // < 2^53
    uint64_t low = (x & 0xfffffffffffffULL) | 0x4330000000000000ULL;  // 2^52 + low 52 bits
    double low_d;
    memcpy(&low_d, &low, sizeof low_d);
    double u = ((low_d - 0x1p52) + (double)(int32_t)(x >> 52) * 0x1p52) * 0x1p-53;
    int32_t l = (int32_t)(t + u);
    int32_t on_grid = -(int32_t)(fabs(t - (double)r) <= snap);
    l ^= (l ^ r) & on_grid;
    l = l < s ? l : s;
    int32_t neg = -(int32_t)(v[i] < 0);
    code[i] = (uint8_t)(s + ((l ^ neg) - neg));
  }
}

/* Packs the m codes at code (its room padded to a multiple of 4 entries, which this zeroes) of
 * `bits` bits into the bytes at out, from the low bit up: m codes start on a byte boundary
 * (buckets hold 1024 values). Whole bytes are written. */
static void pack_codes(uint8_t* code, size_t m, int bits, unsigned char* out) {
  size_t nb = (m * (size_t)bits + 7) / 8;
  memset(code + m, 0, (4 - m % 4) % 4);
  if (bits == 8) {
    memcpy(out, code, nb);
  } else if (bits == 4) {
    for (size_t b = 0; b < nb; b++) out[b] = (unsigned char)(code[2 * b] | code[2 * b + 1] << 4);
  } else {
    for (size_t b = 0; b < nb; b++)
      out[b] = (unsigned char)(code[4 * b] | code[4 * b + 1] << 2 | code[4 * b + 2] << 4 |
                               code[4 * b + 3] << 6);
  }
}

static uint32_t get_code(const unsigned char* codes, size_t i, int bits) {
  size_t bit = i * (size_t)bits;
  return ((uint32_t)codes[bit / 8] >> (bit % 8)) & ((1u << bits) - 1);
}

hvds_result_t hvds__quant_encode(const void* src, size_t n, hvds_dtype_t dtype, int bits,
                                 uint64_t seed, void* dst) {
  int s = hvds__quant_levels(bits);
  if (s == 0 || !hvds__quant_dtype_ok(dtype)) return HVDS_INVALID_ARGUMENT;
  if (n == 0) return HVDS_SUCCESS;
  size_t nb = buckets(n);
  unsigned char* codes = (unsigned char*)dst + nb * sizeof(float);
  size_t written = nb * sizeof(float) + code_bytes(n, bits);  // the padding after is zeroed
  memset((char*)dst + written, 0, hvds__quant_bytes(n, bits) - written);
  double v[HVDS_QUANT_BUCKET];
  uint8_t code[HVDS_QUANT_BUCKET + 4];
  for (size_t b = 0; b < nb; b++) {
    size_t first = b * HVDS_QUANT_BUCKET;
    size_t m = n - first < HVDS_QUANT_BUCKET ? n - first : HVDS_QUANT_BUCKET;
    load(src, dtype, first, m, v);
    float scale = bucket_scale(v, m);
    memcpy((char*)dst + b * sizeof(float), &scale, sizeof scale);
    if (scale > 0)
      bucket_codes(v, m, s, (double)s / scale, seed, first, code);
    else  // a zero or NaN bucket: every value level 0 (code s)
      memset(code, s, m);
    pack_codes(code, m, bits, codes + first * (size_t)bits / 8);
  }
  return HVDS_SUCCESS;
}

hvds_result_t hvds__quant_decode(const void* src, size_t n, int bits, hvds_dtype_t dtype,
                                 void* dst) {
  int s = hvds__quant_levels(bits);
  if (s == 0 || !hvds__quant_dtype_ok(dtype)) return HVDS_INVALID_ARGUMENT;
  size_t nb = buckets(n);
  const unsigned char* codes = (const unsigned char*)src + nb * sizeof(float);
  double v[HVDS_QUANT_BUCKET], value[256];  // value[c]: what code c decodes to in this bucket
  for (size_t b = 0; b < nb; b++) {
    size_t first = b * HVDS_QUANT_BUCKET;
    size_t m = n - first < HVDS_QUANT_BUCKET ? n - first : HVDS_QUANT_BUCKET;
    float scale;
    memcpy(&scale, (const char*)src + b * sizeof(float), sizeof scale);
    for (int c = 0; c <= 2 * s; c++)  // the maximum level gives back exactly the scale
      value[c] = (double)(c - s) * scale / s;
    for (size_t i = 0; i < m; i++) v[i] = value[get_code(codes, first + i, bits)];
    store(v, first, m, dtype, dst);
  }
  return HVDS_SUCCESS;
}
