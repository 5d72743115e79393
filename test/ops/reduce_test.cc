// Kernels: reduce, scale and the 16-bit float conversions against serial references.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "test_util.h"

using namespace hvds_test;

namespace {

uint32_t bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

float from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

// Reference: f rounded to nearest even with mant_bits mantissa bits, exponent >= min_exp
// (subnormals below), overflowing to Inf above max_finite. Computed in double.
double round_ref(float f, int mant_bits, int min_exp, double max_finite) {
  double d = f;
  if (d == 0 || std::isinf(d)) return d;
  int e = std::max(std::ilogb(d), min_exp);
  double ulp = std::ldexp(1.0, e - mant_bits);
  double q = std::nearbyint(d / ulp) * ulp;  // default rounding mode: ties to even
  if (std::fabs(q) > max_finite) return std::copysign(INFINITY, d);
  return q;
}

void expect_half_matches(float f) {
  float got = hvds__half_to_float(hvds__float_to_half(f));
  double want = round_ref(f, 10, -14, 65504.0);
  EXPECT_EQ(got, static_cast<float>(want)) << "f=" << f << " bits=" << std::hex << bits(f);
  EXPECT_EQ(std::signbit(got), std::signbit(f)) << f;
}

void expect_bf16_matches(float f) {
  float got = hvds__bf16_to_float(hvds__float_to_bf16(f));
  double want = round_ref(f, 7, -126, 3.3895313892515355e38);
  EXPECT_EQ(got, static_cast<float>(want)) << "f=" << f << " bits=" << std::hex << bits(f);
}

}  // namespace

TEST(HalfConversion, EveryHalfDecodesAndRoundTrips) {
  for (uint32_t h = 0; h < 65536; h++) {
    float f = hvds__half_to_float(static_cast<uint16_t>(h));
    uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    double want = exp == 0    ? std::ldexp(static_cast<double>(mant), -24)
                  : exp == 31 ? (mant ? NAN : INFINITY)
                              : std::ldexp(1.0 + mant / 1024.0, static_cast<int>(exp) - 15);
    if (h & 0x8000) want = -want;
    if (exp == 31 && mant) {
      EXPECT_TRUE(std::isnan(f)) << h;
      EXPECT_EQ(hvds__float_to_half(f) & 0x7e00, 0x7e00) << "NaN stays a quiet NaN";
      continue;
    }
    ASSERT_EQ(f, static_cast<float>(want)) << h;
    ASSERT_EQ(hvds__float_to_half(f), h) << "round trip of " << h;
  }
}

TEST(HalfConversion, RoundsToNearestEven) {
  // Edges: largest half, the tie that overflows, subnormal ties, min normal.
  const float cases[] = {65504.0f,    65519.99f,   65520.0f,    65536.0f, 1e10f,        0x1p-24f,
                         0x1p-25f,    0x1.8p-24f,  0x1.8p-25f,  0x1p-26f, 0x1.ff8p-15f, 0x1p-14f,
                         0x1.0018p0f, 0x1.0008p0f, 0x1.0010p0f, 1.0f / 3, 2049.0f,      2051.0f,
                         -2051.0f,    0.0f,        -0.0f,       1e-30f,   INFINITY,     -INFINITY};
  for (float f : cases) expect_half_matches(f);
  std::mt19937 rng(1);
  for (int i = 0; i < 200000; i++) {
    float f = from_bits(rng());
    if (std::isnan(f)) continue;
    expect_half_matches(f);
  }
  // Dense sweep of the half range so ties are hit often.
  for (uint32_t u = 0x33000000u; u < 0x47800000u; u += 0x1ffu) expect_half_matches(from_bits(u));
}

TEST(Bf16Conversion, RoundsToNearestEven) {
  const float cases[] = {1.0f,
                         0x1.01p0f,
                         0x1.03p0f,
                         0x1.008p0f,
                         0x1.018p0f,
                         3.3895e38f,
                         std::numeric_limits<float>::max(),
                         1e-40f,
                         0x1p-149f,
                         -0x1.008p-130f,
                         0.0f,
                         -0.0f,
                         INFINITY,
                         -INFINITY};
  for (float f : cases) expect_bf16_matches(f);
  std::mt19937 rng(2);
  for (int i = 0; i < 200000; i++) {
    float f = from_bits(rng());
    if (!std::isnan(f)) expect_bf16_matches(f);
  }
  EXPECT_TRUE(std::isnan(hvds__bf16_to_float(hvds__float_to_bf16(NAN))));
  EXPECT_EQ(hvds__float_to_bf16(from_bits(0x7f800001u)) & 0x7fc0, 0x7fc0) << "quiet NaN";
}

// Every dtype and op on random operands (odd length, crossing the kernels' 16-element blocks).
class ReduceKernel : public ::testing::TestWithParam<int> {};

TEST_P(ReduceKernel, MatchesSerialReference) {
  hvds_dtype_t t = static_cast<hvds_dtype_t>(GetParam());
  size_t es = hvds__dtype_bytes(t), n = 1037;
  std::mt19937 rng(static_cast<unsigned>(t) + 7);
  std::uniform_real_distribution<double> fdist(-100, 100);
  for (int op : ops_for(t)) {
    std::vector<char> a(n * es), b(n * es), want(n * es);
    for (size_t i = 0; i < n; i++) {
      if (is_float(t)) {
        set(t, a.data(), i, fdist(rng));
        set(t, b.data(), i, fdist(rng));
      } else {  // raw random bytes: exercises wrap-around
        for (size_t k = 0; k < es; k++) {
          a[i * es + k] = static_cast<char>(rng());
          b[i * es + k] = static_cast<char>(rng());
        }
        if (t == HVDS_BOOL) a[i] &= 1, b[i] &= 1;
      }
    }
    for (size_t i = 0; i < n; i++) {
      double x = get(t, a.data(), i), y = get(t, b.data(), i);
      if (!is_float(t) && t != HVDS_BOOL) {
        // Integers: wrapping arithmetic in uint64, truncated to the width by memcpy.
        uint64_t ux = 0, uy = 0;
        memcpy(&ux, a.data() + i * es, es);
        memcpy(&uy, b.data() + i * es, es);
        int64_t sx = static_cast<int64_t>(x), sy = static_cast<int64_t>(y);
        if (t == HVDS_INT64) sx = static_cast<int64_t>(ux), sy = static_cast<int64_t>(uy);
        uint64_t r;
        if (op == HVDS_SUM || op == HVDS_AVERAGE)
          r = ux + uy;
        else if (op == HVDS_PRODUCT)
          r = ux * uy;
        else if (op == HVDS_MIN)
          r = static_cast<uint64_t>(std::min(sx, sy));
        else if (op == HVDS_MAX)
          r = static_cast<uint64_t>(std::max(sx, sy));
        else if (op == kBand)
          r = ux & uy;
        else
          r = ux | uy;
        memcpy(want.data() + i * es, &r, es);
      } else if (t == HVDS_FLOAT32 || t == HVDS_FLOAT16 || t == HVDS_BFLOAT16) {
        // Combined in float32 and rounded once to the storage type.
        float fx = static_cast<float>(x), fy = static_cast<float>(y);
        float r = op == HVDS_PRODUCT ? fx * fy
                  : (op == HVDS_SUM || op == HVDS_AVERAGE)
                      ? fx + fy
                      : static_cast<float>(combine(t, op, fx, fy));
        set(t, want.data(), i, r);
      } else {
        set(t, want.data(), i, combine(t, op, x, y));  // float64 and bool
      }
    }
    ASSERT_EQ(hvds__reduce(a.data(), b.data(), n, t, op_arg(op)), HVDS_SUCCESS);
    EXPECT_EQ(first_diff(a, want, es), -1) << dtype_str(t) << " op " << op;
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, ReduceKernel,
                         ::testing::Range(0, static_cast<int>(HVDS_DTYPE_COUNT)),
                         [](const auto& info) {
                           return std::string(dtype_str(static_cast<hvds_dtype_t>(info.param)));
                         });

TEST(Reduce, IntegerOverflowWraps) {
  int32_t a[2] = {INT32_MAX, INT32_MIN}, b[2] = {1, -1};
  ASSERT_EQ(hvds__reduce(a, b, 2, HVDS_INT32, HVDS_SUM), HVDS_SUCCESS);
  EXPECT_EQ(a[0], INT32_MIN);
  EXPECT_EQ(a[1], INT32_MAX);
  uint16_t c = 65535, d = 65535;
  ASSERT_EQ(hvds__reduce(&c, &d, 1, HVDS_UINT16, HVDS_PRODUCT), HVDS_SUCCESS);
  EXPECT_EQ(c, 1);
}

TEST(Reduce, MinMaxPropagateNan) {
  float a[2] = {1.0f, NAN}, b[2] = {NAN, 1.0f};
  float c[2] = {1.0f, NAN};
  ASSERT_EQ(hvds__reduce(a, b, 2, HVDS_FLOAT32, HVDS_MIN), HVDS_SUCCESS);
  EXPECT_TRUE(std::isnan(a[0]) && std::isnan(a[1]));
  ASSERT_EQ(hvds__reduce(c, b, 2, HVDS_FLOAT32, HVDS_MAX), HVDS_SUCCESS);
  EXPECT_TRUE(std::isnan(c[0]) && std::isnan(c[1]));
}

TEST(Reduce, Fp16SumRoundsOnce) {
  // 2048 + 1 is a tie in fp16 (spacing 2): rounds to even 2048; 2050 + 1 rounds to 2052.
  uint16_t a[2] = {hvds__float_to_half(2048), hvds__float_to_half(2050)};
  uint16_t b[2] = {hvds__float_to_half(1), hvds__float_to_half(1)};
  ASSERT_EQ(hvds__reduce(a, b, 2, HVDS_FLOAT16, HVDS_SUM), HVDS_SUCCESS);
  EXPECT_EQ(hvds__half_to_float(a[0]), 2048.0f);
  EXPECT_EQ(hvds__half_to_float(a[1]), 2052.0f);
  uint16_t x = hvds__float_to_bf16(256), y = hvds__float_to_bf16(1);  // bf16 spacing 2 at 256
  ASSERT_EQ(hvds__reduce(&x, &y, 1, HVDS_BFLOAT16, HVDS_SUM), HVDS_SUCCESS);
  EXPECT_EQ(hvds__bf16_to_float(x), 256.0f);
}

TEST(Reduce, UnsupportedCombinations) {
  float f = 1;
  EXPECT_EQ(hvds__reduce(&f, &f, 1, HVDS_FLOAT32, op_arg(kBand)), HVDS_NOT_SUPPORTED);
  EXPECT_EQ(hvds__reduce(&f, &f, 1, HVDS_FLOAT16, op_arg(kBor)), HVDS_NOT_SUPPORTED);
  EXPECT_EQ(hvds__reduce(&f, &f, 1, HVDS_FLOAT32, HVDS_ADASUM), HVDS_NOT_SUPPORTED);
  EXPECT_EQ(hvds__reduce(&f, &f, 1, static_cast<hvds_dtype_t>(13), HVDS_SUM), HVDS_NOT_SUPPORTED);
  EXPECT_EQ(hvds__reduce(nullptr, nullptr, 0, HVDS_INT32, HVDS_SUM), HVDS_SUCCESS);
}

TEST(Scale, IntegersTruncateTowardZeroAndSaturate) {
  int32_t a[4] = {7, -7, 5, INT32_MAX};
  ASSERT_EQ(hvds__scale(a, 4, HVDS_INT32, 0.5), HVDS_SUCCESS);
  EXPECT_EQ(a[0], 3);
  EXPECT_EQ(a[1], -3);
  EXPECT_EQ(a[2], 2);
  EXPECT_EQ(a[3], INT32_MAX / 2);
  uint8_t u[2] = {200, 3};
  ASSERT_EQ(hvds__scale(u, 2, HVDS_UINT8, 2.0), HVDS_SUCCESS);
  EXPECT_EQ(u[0], 255);
  EXPECT_EQ(u[1], 6);
  int64_t big = INT64_MAX;
  ASSERT_EQ(hvds__scale(&big, 1, HVDS_INT64, 4.0), HVDS_SUCCESS);
  EXPECT_EQ(big, INT64_MAX);
  int8_t s = -100;
  ASSERT_EQ(hvds__scale(&s, 1, HVDS_INT8, 3.0), HVDS_SUCCESS);
  EXPECT_EQ(s, INT8_MIN);
}

TEST(Scale, FloatsAndBool) {
  float f[3] = {1, 3, -6};
  ASSERT_EQ(hvds__scale(f, 3, HVDS_FLOAT32, 1.0 / 3), HVDS_SUCCESS);
  EXPECT_EQ(f[1], 3.0f * static_cast<float>(1.0 / 3));
  EXPECT_EQ(f[2], -2.0f);
  // As Horovod: the factor is rounded to float32 first (9 * 0.1 in double would give 0.9f).
  float nine = 9;
  ASSERT_EQ(hvds__scale(&nine, 1, HVDS_FLOAT32, 0.1), HVDS_SUCCESS);
  EXPECT_EQ(nine, 9.0f * 0.1f);
  EXPECT_NE(nine, 0.9f);
  double d = 10;
  ASSERT_EQ(hvds__scale(&d, 1, HVDS_FLOAT64, 0.25), HVDS_SUCCESS);
  EXPECT_EQ(d, 2.5);
  uint16_t h = hvds__float_to_half(3), bf = hvds__float_to_bf16(3);
  ASSERT_EQ(hvds__scale(&h, 1, HVDS_FLOAT16, 0.5), HVDS_SUCCESS);
  ASSERT_EQ(hvds__scale(&bf, 1, HVDS_BFLOAT16, 0.5), HVDS_SUCCESS);
  EXPECT_EQ(hvds__half_to_float(h), 1.5f);
  EXPECT_EQ(hvds__bf16_to_float(bf), 1.5f);
  uint8_t b[2] = {1, 0};
  ASSERT_EQ(hvds__scale(b, 2, HVDS_BOOL, 0.5), HVDS_SUCCESS);  // trunc(0.5) = 0
  EXPECT_EQ(b[0], 0);
  b[0] = 1;
  ASSERT_EQ(hvds__scale(b, 2, HVDS_BOOL, 2.0), HVDS_SUCCESS);
  EXPECT_EQ(b[0], 1);
  EXPECT_EQ(b[1], 0);
}

TEST(Divide, FloatsDivideExactlyIntegersScaleLikeHorovod) {
  // An average of equal values is exact: (x * 3) / 3 == x, where x * (1/3 as float) is not.
  float x = 0.1f, f = x * 3.0f;
  ASSERT_EQ(hvds__divide(&f, 1, HVDS_FLOAT32, 3), HVDS_SUCCESS);
  EXPECT_EQ(f, (x * 3.0f) / 3.0f);
  double d = 7.0;
  ASSERT_EQ(hvds__divide(&d, 1, HVDS_FLOAT64, 3), HVDS_SUCCESS);
  EXPECT_EQ(d, 7.0 / 3.0);
  uint16_t h = hvds__float_to_half(5), bf = hvds__float_to_bf16(5);
  ASSERT_EQ(hvds__divide(&h, 1, HVDS_FLOAT16, 3), HVDS_SUCCESS);
  ASSERT_EQ(hvds__divide(&bf, 1, HVDS_BFLOAT16, 3), HVDS_SUCCESS);
  EXPECT_EQ(h, hvds__float_to_half(5.0f / 3.0f));
  EXPECT_EQ(bf, hvds__float_to_bf16(5.0f / 3.0f));
  int32_t i[2] = {7, -7};  // truncated toward zero, as hvds__scale by 1/2
  ASSERT_EQ(hvds__divide(i, 2, HVDS_INT32, 2), HVDS_SUCCESS);
  EXPECT_EQ(i[0], 3);
  EXPECT_EQ(i[1], -3);
  EXPECT_EQ(hvds__divide(&d, 1, HVDS_FLOAT64, 0), HVDS_NOT_SUPPORTED);
}

// The blocked loops: every length around the block size, at unaligned starts, element for
// element the scalar arithmetic (saturation and NaN included in the blocks, not only the tail).
TEST(Scale, BlockedLoopsMatchScalarArithmeticAtEveryLengthAndOffset) {
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> val(-1e4f, 1e4f);
  for (size_t off = 0; off < 3; off++)
    for (size_t n = 0; n <= 70; n++) {
      std::vector<float> f(n + off), fd(n + off);
      std::vector<double> d(n + off);
      std::vector<uint16_t> h(n + off), bf(n + off);
      std::vector<int16_t> i16(n + off);
      for (size_t k = 0; k < n + off; k++) {
        f[k] = fd[k] = val(gen);
        d[k] = f[k];
        h[k] = hvds__float_to_half(f[k] / 16);
        bf[k] = hvds__float_to_bf16(f[k]);
        i16[k] = static_cast<int16_t>(f[k] * 3);
      }
      if (n > 20) f[off + 17] = fd[off + 17] = NAN;
      auto f0 = f, fd0 = fd;
      auto d0 = d;
      auto h0 = h, bf0 = bf;
      auto i0 = i16;
      ASSERT_EQ(hvds__scale(f.data() + off, n, HVDS_FLOAT32, 0.1), HVDS_SUCCESS);
      ASSERT_EQ(hvds__divide(fd.data() + off, n, HVDS_FLOAT32, 3), HVDS_SUCCESS);
      ASSERT_EQ(hvds__divide(d.data() + off, n, HVDS_FLOAT64, 7), HVDS_SUCCESS);
      ASSERT_EQ(hvds__divide(h.data() + off, n, HVDS_FLOAT16, 3), HVDS_SUCCESS);
      ASSERT_EQ(hvds__scale(bf.data() + off, n, HVDS_BFLOAT16, 0.3), HVDS_SUCCESS);
      ASSERT_EQ(hvds__scale(i16.data() + off, n, HVDS_INT16, 4.0), HVDS_SUCCESS);
      for (size_t k = 0; k < n + off; k++) {
        bool in = k >= off;
        EXPECT_EQ(bits(f[k]), bits(in ? f0[k] * 0.1f : f0[k])) << n << " " << k;
        EXPECT_EQ(bits(fd[k]), bits(in ? fd0[k] / 3.0f : fd0[k])) << n << " " << k;
        EXPECT_EQ(d[k], in ? d0[k] / 7.0 : d0[k]);
        EXPECT_EQ(h[k], in ? hvds__float_to_half(hvds__half_to_float(h0[k]) / 3.0f) : h0[k]);
        EXPECT_EQ(bf[k],
                  in ? hvds__float_to_bf16(hvds__bf16_to_float(bf0[k]) * static_cast<float>(0.3))
                     : bf0[k]);
        double want = std::trunc(i0[k] * 4.0);
        want = want < INT16_MIN ? INT16_MIN : want > INT16_MAX ? INT16_MAX : want;
        EXPECT_EQ(i16[k], in ? static_cast<int16_t>(want) : i0[k]) << n << " " << k;
      }
    }
}

TEST(Scale, FactorOneIsANoOp) {
  float f = NAN;
  ASSERT_EQ(hvds__scale(&f, 1, HVDS_FLOAT32, 1.0), HVDS_SUCCESS);
  EXPECT_TRUE(std::isnan(f));
  EXPECT_EQ(hvds__scale(nullptr, 0, HVDS_INT32, 0.5), HVDS_SUCCESS);
  EXPECT_EQ(hvds__scale(&f, 1, static_cast<hvds_dtype_t>(14), 0.5), HVDS_NOT_SUPPORTED);
}

TEST(DtypeBytes, AllDtypes) {
  const size_t want[] = {1, 1, 2, 2, 4, 8, 2, 4, 8, 1, 2};
  for (int t = 0; t < HVDS_DTYPE_COUNT; t++)
    EXPECT_EQ(hvds__dtype_bytes(static_cast<hvds_dtype_t>(t)), want[t]);
  EXPECT_EQ(hvds__dtype_bytes(static_cast<hvds_dtype_t>(11)), 0u);
}
