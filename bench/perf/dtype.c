/* Element access for every benchmarked dtype, the test pattern and its reference reductions. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "perf.h"

static const struct {
  const char* label;
  hvds_dtype_t dt;
} kDtypes[] = {
    {"uint8", HVDS_UINT8},       {"int8", HVDS_INT8},       {"uint16", HVDS_UINT16},
    {"int16", HVDS_INT16},       {"int32", HVDS_INT32},     {"int64", HVDS_INT64},
    {"float16", HVDS_FLOAT16},   {"float32", HVDS_FLOAT32}, {"float64", HVDS_FLOAT64},
    {"bfloat16", HVDS_BFLOAT16},
};
static const struct {
  const char* label;
  hvds_reduce_op_t op;
} kOps[] = {
    {"sum", HVDS_SUM}, {"avg", HVDS_AVERAGE},  {"min", HVDS_MIN},
    {"max", HVDS_MAX}, {"prod", HVDS_PRODUCT},
};
#define COUNT_OF(x) (sizeof(x) / sizeof((x)[0]))

int perf_parse_dtype(const char* text, hvds_dtype_t* out) {
  for (size_t k = 0; k < COUNT_OF(kDtypes); k++)
    if (!strcmp(text, kDtypes[k].label)) {
      *out = kDtypes[k].dt;
      return 0;
    }
  return -1;
}

const char* perf_dtype_label(hvds_dtype_t dt) {
  for (size_t k = 0; k < COUNT_OF(kDtypes); k++)
    if (kDtypes[k].dt == dt) return kDtypes[k].label;
  return "?";
}

int perf_parse_op(const char* text, hvds_reduce_op_t* out) {
  for (size_t k = 0; k < COUNT_OF(kOps); k++)
    if (!strcmp(text, kOps[k].label)) {
      *out = kOps[k].op;
      return 0;
    }
  return -1;
}

const char* perf_op_label(hvds_reduce_op_t op) {
  for (size_t k = 0; k < COUNT_OF(kOps); k++)
    if (kOps[k].op == op) return kOps[k].label;
  return "?";
}

// IEEE half precision, round to nearest; the pattern's values are small integers, always exact.
static uint16_t half_from(double v) {
  uint16_t sign = v < 0 ? 0x8000 : 0;
  v = fabs(v);
  if (v == 0) return sign;
  int e;
  double m = frexp(v, &e);  // v = m * 2^e with m in [0.5, 1)
  if (e + 14 <= 0) return sign;
  long f = lround((m * 2 - 1) * 1024);
  if (f == 1024) {
    f = 0;
    e++;
  }
  if (e + 14 >= 31) return sign | 0x7c00;
  return (uint16_t)(sign | ((e + 14) << 10) | f);
}

static double half_to(uint16_t h) {
  int e = (h >> 10) & 31, f = h & 1023;
  double v = e == 0 ? ldexp(f, -24) : e == 31 ? (f ? NAN : INFINITY) : ldexp(1024 + f, e - 25);
  return (h & 0x8000) ? -v : v;
}

void perf_set(void* p, hvds_dtype_t dt, size_t i, double v) {
  switch (dt) {
    case HVDS_UINT8:
      ((uint8_t*)p)[i] = (uint8_t)v;
      break;
    case HVDS_INT8:
      ((int8_t*)p)[i] = (int8_t)v;
      break;
    case HVDS_UINT16:
      ((uint16_t*)p)[i] = (uint16_t)v;
      break;
    case HVDS_INT16:
      ((int16_t*)p)[i] = (int16_t)v;
      break;
    case HVDS_INT32:
      ((int32_t*)p)[i] = (int32_t)v;
      break;
    case HVDS_INT64:
      ((int64_t*)p)[i] = (int64_t)v;
      break;
    case HVDS_FLOAT16:
      ((uint16_t*)p)[i] = half_from(v);
      break;
    case HVDS_FLOAT32:
      ((float*)p)[i] = (float)v;
      break;
    case HVDS_FLOAT64:
      ((double*)p)[i] = v;
      break;
    case HVDS_BFLOAT16: {
      float f = (float)v;  // truncating is exact for the pattern's small integers
      uint32_t bits;
      memcpy(&bits, &f, sizeof(bits));
      ((uint16_t*)p)[i] = (uint16_t)(bits >> 16);
      break;
    }
    default:
      break;
  }
}

double perf_get(const void* p, hvds_dtype_t dt, size_t i) {
  switch (dt) {
    case HVDS_UINT8:
      return ((const uint8_t*)p)[i];
    case HVDS_INT8:
      return ((const int8_t*)p)[i];
    case HVDS_UINT16:
      return ((const uint16_t*)p)[i];
    case HVDS_INT16:
      return ((const int16_t*)p)[i];
    case HVDS_INT32:
      return ((const int32_t*)p)[i];
    case HVDS_INT64:
      return (double)((const int64_t*)p)[i];
    case HVDS_FLOAT16:
      return half_to(((const uint16_t*)p)[i]);
    case HVDS_FLOAT32:
      return ((const float*)p)[i];
    case HVDS_FLOAT64:
      return ((const double*)p)[i];
    case HVDS_BFLOAT16: {
      uint32_t bits = (uint32_t)((const uint16_t*)p)[i] << 16;
      float f;
      memcpy(&f, &bits, sizeof(f));
      return f;
    }
    default:
      return NAN;
  }
}

double perf_value(hvds_reduce_op_t op, int r, size_t i) {
  int v = hvds_bench_value(r, i);
  return op == HVDS_PRODUCT ? 1 + v % 2 : v;
}

void perf_fill(void* p, hvds_dtype_t dt, size_t n, hvds_reduce_op_t op, int r, size_t first) {
  if (dt == HVDS_FLOAT32 && op != HVDS_PRODUCT && first == 0) {
    hvds_bench_fill_f32((float*)p, n, r);  // the common case, without the per-element switch
    return;
  }
  for (size_t i = 0; i < n; i++) perf_set(p, dt, i, perf_value(op, r, first + i));
}

void perf_reduce_ref(hvds_reduce_op_t op, hvds_dtype_t dt, int np, double ref[11]) {
  for (size_t k = 0; k < 11; k++) {
    double acc = perf_value(op, 0, k);
    for (int r = 1; r < np; r++) {
      double v = perf_value(op, r, k);
      if (op == HVDS_SUM || op == HVDS_AVERAGE) acc += v;
      if (op == HVDS_MIN) acc = v < acc ? v : acc;
      if (op == HVDS_MAX) acc = v > acc ? v : acc;
      if (op == HVDS_PRODUCT) acc *= v;
    }
    ref[k] = op == HVDS_AVERAGE ? acc / np : acc;
  }
  (void)dt;
}

double perf_tolerance(hvds_reduce_op_t op, hvds_dtype_t dt, double want) {
  if (op != HVDS_AVERAGE) return 0;
  switch (dt) {
    case HVDS_FLOAT16:
    case HVDS_BFLOAT16:
      return 1e-2 * fabs(want);
    case HVDS_FLOAT32:
      return 1e-6 * fabs(want);
    case HVDS_FLOAT64:
      return 1e-12 * fabs(want);
    default:
      return 1.0;  // integer averages may truncate or round
  }
}
