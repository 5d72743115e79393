// Stochastic bucket quantization (ops/quantize.h): sizes, unbiasedness over many seeds, the
// per-bucket error bound, exact round trips on the grid, special buckets, argument errors, and
// bit-for-bit agreement with the numpy reference (hvdsparse/common/quantize.py).
#include "quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "reduce.h"
#include "test_util.h"

namespace {

using hvds_test::get;
using hvds_test::set;

const int kWidths[] = {2, 4, 8};

std::vector<char> encode(const void* src, size_t n, hvds_dtype_t t, int bits, uint64_t seed) {
  std::vector<char> q(hvds__quant_bytes(n, bits) + 1, 0x5a);  // + 1: a guard byte
  EXPECT_EQ(hvds__quant_encode(src, n, t, bits, seed, q.data()), HVDS_SUCCESS);
  EXPECT_EQ(q.back(), 0x5a) << "wrote past hvds__quant_bytes()";
  q.pop_back();
  return q;
}

std::vector<char> decode(const std::vector<char>& q, size_t n, int bits, hvds_dtype_t t) {
  std::vector<char> out(n * hvds__dtype_bytes(t) + 1, 0);
  EXPECT_EQ(hvds__quant_decode(q.data(), n, bits, t, out.data()), HVDS_SUCCESS);
  out.pop_back();
  return out;
}

// n values of dtype t: normal, times a scale that changes per bucket, with a few zeros.
std::vector<char> random_values(size_t n, hvds_dtype_t t, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0, 1);
  std::vector<char> buf(n * hvds__dtype_bytes(t));
  for (size_t i = 0; i < n; i++) {
    double mult = 1.0 + static_cast<double>((i / HVDS_QUANT_BUCKET) % 5) * 3.0;
    set(t, buf.data(), i, i % 97 == 3 ? 0.0 : nd(rng) * mult);
  }
  return buf;
}

// Per value, the bucket's max |v| (the scale, before rounding to float32).
std::vector<double> bucket_max(const std::vector<char>& buf, size_t n, hvds_dtype_t t) {
  std::vector<double> out(n);
  for (size_t b = 0; b * HVDS_QUANT_BUCKET < n; b++) {
    size_t lo = b * HVDS_QUANT_BUCKET, hi = std::min(n, lo + HVDS_QUANT_BUCKET);
    double mx = 0;
    for (size_t i = lo; i < hi; i++) mx = std::max(mx, std::fabs(get(t, buf.data(), i)));
    for (size_t i = lo; i < hi; i++) out[i] = mx;
  }
  return out;
}

// The numpy reference's hash of a byte string (FNV-1a 64).
uint64_t fnv(const void* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; i++)
    h = (h ^ static_cast<const unsigned char*>(p)[i]) * 0x100000001b3ULL;
  return h;
}

}  // namespace

TEST(Quantize, LevelsAndSizes) {
  EXPECT_EQ(hvds__quant_levels(2), 1);
  EXPECT_EQ(hvds__quant_levels(4), 7);
  EXPECT_EQ(hvds__quant_levels(8), 127);
  for (int bad : {0, 1, 3, 5, 16, 32, -4}) EXPECT_EQ(hvds__quant_levels(bad), 0) << bad;
  EXPECT_EQ(hvds__quant_bytes(0, 4), 0u);
  EXPECT_EQ(hvds__quant_bytes(10, 3), 0u);
  EXPECT_EQ(hvds__quant_bytes(1, 8), 8u);                 // 4 scale + 1 code, padded
  EXPECT_EQ(hvds__quant_bytes(1024, 4), 4u + 512u + 4u);  // one bucket, padded
  EXPECT_EQ(hvds__quant_bytes(1025, 2), 8u + 257u + 7u);  // two buckets, 257 code bytes, pad
  EXPECT_EQ(hvds__quant_bytes(2500, 2), 640u);
  for (int bits : kWidths)
    for (size_t n : {1, 7, 1023, 1024, 1025, 5000}) EXPECT_EQ(hvds__quant_bytes(n, bits) % 8, 0u);
  EXPECT_TRUE(hvds__quant_dtype_ok(HVDS_FLOAT32));
  EXPECT_TRUE(hvds__quant_dtype_ok(HVDS_FLOAT64));
  EXPECT_TRUE(hvds__quant_dtype_ok(HVDS_FLOAT16));
  EXPECT_TRUE(hvds__quant_dtype_ok(HVDS_BFLOAT16));
  EXPECT_FALSE(hvds__quant_dtype_ok(HVDS_INT32));
  EXPECT_FALSE(hvds__quant_dtype_ok(HVDS_BOOL));
}

TEST(Quantize, RejectsBadWidthAndDtype) {
  float v[4] = {1, 2, 3, 4};
  char q[64];
  memset(q, 0x11, sizeof q);
  EXPECT_EQ(hvds__quant_encode(v, 4, HVDS_FLOAT32, 3, 1, q), HVDS_INVALID_ARGUMENT);
  EXPECT_EQ(hvds__quant_encode(v, 4, HVDS_INT32, 4, 1, q), HVDS_INVALID_ARGUMENT);
  EXPECT_EQ(q[0], 0x11) << "nothing is written on error";
  EXPECT_EQ(hvds__quant_decode(q, 4, 16, HVDS_FLOAT32, v), HVDS_INVALID_ARGUMENT);
  EXPECT_EQ(hvds__quant_decode(q, 4, 4, HVDS_INT64, v), HVDS_INVALID_ARGUMENT);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(hvds__quant_encode(nullptr, 0, HVDS_FLOAT32, 4, 1, nullptr), HVDS_SUCCESS);
  EXPECT_EQ(hvds__quant_decode(nullptr, 0, 4, HVDS_FLOAT32, nullptr), HVDS_SUCCESS);
}

// The mean of many decodings (different seeds) converges to the input: |mean - v| within 6
// standard errors of a variable confined to one level step (Hoeffding: per-value failure odds
// below 1e-7; the seeds are fixed, so the test is deterministic).
TEST(Quantize, UnbiasedInExpectation) {
  const size_t n = HVDS_QUANT_BUCKET + 333;
  const int draws = 3000;
  for (int bits : kWidths) {
    SCOPED_TRACE(bits);
    auto in = random_values(n, HVDS_FLOAT64, 7 + bits);
    auto mx = bucket_max(in, n, HVDS_FLOAT64);
    std::vector<double> mean(n, 0);
    for (int d = 0; d < draws; d++) {
      auto out = decode(encode(in.data(), n, HVDS_FLOAT64, bits, 1000 + d), n, bits, HVDS_FLOAT64);
      for (size_t i = 0; i < n; i++) mean[i] += get(HVDS_FLOAT64, out.data(), i) / draws;
    }
    double bias = 0;
    for (size_t i = 0; i < n; i++) {
      double step = mx[i] / hvds__quant_levels(bits) * (1 + 1e-6);
      double tol = 6 * step / (2 * std::sqrt(static_cast<double>(draws))) + 1e-12;
      double err = mean[i] - get(HVDS_FLOAT64, in.data(), i);
      ASSERT_LE(std::fabs(err), tol) << "value " << i;
      bias += err / step / n;
    }
    // No common offset either: the signed errors average out over all values.
    EXPECT_LT(std::fabs(bias), 6 / (2 * std::sqrt(static_cast<double>(draws) * n)));
  }
}

// |v - q(v)| < scale / s for every value, every width and dtype (plus the dtype's own rounding of
// the decoded value for the 16-bit types).
TEST(Quantize, ErrorBoundedPerBucket) {
  const size_t n = 3 * HVDS_QUANT_BUCKET + 17;
  for (hvds_dtype_t t : {HVDS_FLOAT32, HVDS_FLOAT64, HVDS_FLOAT16, HVDS_BFLOAT16}) {
    for (int bits : kWidths) {
      SCOPED_TRACE(std::string(hvds_test::dtype_str(t)) + " bits " + std::to_string(bits));
      auto in = random_values(n, t, 11);
      auto mx = bucket_max(in, n, t);
      double rel = t == HVDS_FLOAT16 ? 1e-3 : t == HVDS_BFLOAT16 ? 8e-3 : 1e-6;
      for (uint64_t seed : {1u, 2u, 99u}) {
        auto out = decode(encode(in.data(), n, t, bits, seed), n, bits, t);
        for (size_t i = 0; i < n; i++) {
          double v = get(t, in.data(), i), q = get(t, out.data(), i);
          ASSERT_LE(std::fabs(v - q), mx[i] / hvds__quant_levels(bits) * (1 + rel) + rel * mx[i])
              << "value " << i << ": " << v << " -> " << q;
          ASSERT_LE(std::fabs(q), mx[i] * (1 + rel)) << "value " << i;
          if (v == 0) {
            ASSERT_EQ(q, 0.0) << "zero must stay zero";
          }
        }
      }
    }
  }
}

// Decoded values are on the grid: encoding them again (any seed) gives the same bytes, and
// decoding those gives the same values bit for bit.
TEST(Quantize, RoundTripExactOnGrid) {
  const size_t n = 2 * HVDS_QUANT_BUCKET + 100;
  for (hvds_dtype_t t : {HVDS_FLOAT32, HVDS_FLOAT64}) {
    for (int bits : kWidths) {
      SCOPED_TRACE(std::string(hvds_test::dtype_str(t)) + " bits " + std::to_string(bits));
      auto in = random_values(n, t, 5);
      auto q1 = encode(in.data(), n, t, bits, 42);
      auto grid = decode(q1, n, bits, t);
      for (uint64_t seed : {42u, 7u, 123456789u}) {
        auto q2 = encode(grid.data(), n, t, bits, seed);
        EXPECT_EQ(q2, q1) << "seed " << seed;
        EXPECT_EQ(decode(q2, n, bits, t), grid) << "seed " << seed;
      }
    }
  }
  // Hand-made grid values: l * S / s (in double, then float32) with the maximum level present.
  for (int bits : kWidths) {
    int s = hvds__quant_levels(bits);
    const double S = 3.7f;
    std::vector<float> v;
    for (int l = -s; l <= s; l++) v.push_back(static_cast<float>(l * S / s));
    auto q = encode(v.data(), v.size(), HVDS_FLOAT32, bits, 9);
    auto out = decode(q, v.size(), bits, HVDS_FLOAT32);
    EXPECT_EQ(0, memcmp(out.data(), v.data(), v.size() * sizeof(float))) << "bits " << bits;
  }
}

TEST(Quantize, SpecialBuckets) {
  const size_t n = 3 * HVDS_QUANT_BUCKET;
  std::vector<float> v(n, 0.0f);  // bucket 0: all zero
  for (size_t i = HVDS_QUANT_BUCKET; i < n; i++) v[i] = 1.0f + (i % 5);
  v[HVDS_QUANT_BUCKET + 10] = std::numeric_limits<float>::quiet_NaN();     // bucket 1: a NaN
  v[2 * HVDS_QUANT_BUCKET + 3] = -std::numeric_limits<float>::infinity();  // bucket 2: an Inf
  for (int bits : kWidths) {
    auto out = decode(encode(v.data(), n, HVDS_FLOAT32, bits, 3), n, bits, HVDS_FLOAT32);
    const float* q = reinterpret_cast<const float*>(out.data());
    for (size_t i = 0; i < HVDS_QUANT_BUCKET; i++) ASSERT_EQ(q[i], 0.0f);
    for (size_t i = HVDS_QUANT_BUCKET; i < n; i++) ASSERT_TRUE(std::isnan(q[i])) << i;
  }
  // Constant buckets are on the grid (every value is the scale).
  std::vector<double> c(1500, -2.5);
  for (int bits : kWidths) {
    auto out =
        decode(encode(c.data(), c.size(), HVDS_FLOAT64, bits, 3), c.size(), bits, HVDS_FLOAT64);
    EXPECT_EQ(0, memcmp(out.data(), c.data(), c.size() * sizeof(double)));
  }
  // float64 beyond the float32 range: NaN, not a silently wrong scale.
  std::vector<double> big = {1e300, 1.0};
  auto out = decode(encode(big.data(), 2, HVDS_FLOAT64, 8, 3), 2, 8, HVDS_FLOAT64);
  EXPECT_TRUE(std::isnan(get(HVDS_FLOAT64, out.data(), 1)));
}

TEST(Quantize, DeterministicPerSeed) {
  const size_t n = 4000;
  auto in = random_values(n, HVDS_FLOAT32, 3);
  for (int bits : kWidths) {
    EXPECT_EQ(encode(in.data(), n, HVDS_FLOAT32, bits, 77),
              encode(in.data(), n, HVDS_FLOAT32, bits, 77));
    EXPECT_NE(encode(in.data(), n, HVDS_FLOAT32, bits, 77),
              encode(in.data(), n, HVDS_FLOAT32, bits, 78));
  }
  EXPECT_NE(hvds__quant_seed(1, 2, 3), hvds__quant_seed(1, 2, 4));
  EXPECT_NE(hvds__quant_seed(1, 2, 3), hvds__quant_seed(1, 3, 3));
  EXPECT_NE(hvds__quant_seed(1, 2, 3), hvds__quant_seed(2, 2, 3));
}

// The same bytes as hvdsparse/common/quantize.py (hashes computed there for this input:
// v_i = ((7919 i mod 2001) - 1000) / 137 * (1 + i div 1024) as float32, with zeros at 5 and
// 1024..1029, seed 12345).
TEST(Quantize, MatchesNumpyReference) {
  const size_t n = 2500;
  std::vector<float> v(n);
  for (size_t i = 0; i < n; i++)
    v[i] = static_cast<float>((static_cast<double>((i * 7919) % 2001) - 1000.0) / 137.0 *
                              static_cast<double>(1 + i / 1024));
  v[5] = 0;
  for (size_t i = 1024; i < 1030; i++) v[i] = 0;
  struct {
    int bits;
    size_t bytes;
    uint64_t enc, dec;
  } want[] = {{2, 640, 0xb4cfd5f5eef5df04ULL, 0xc667449663b087edULL},
              {4, 1264, 0x3a95c1e44190d6beULL, 0xb74f0a2baba04dedULL},
              {8, 2512, 0x0f50c52c49da1adaULL, 0x54db4316bd05e697ULL}};
  for (const auto& w : want) {
    auto q = encode(v.data(), n, HVDS_FLOAT32, w.bits, 12345);
    ASSERT_EQ(q.size(), w.bytes);
    EXPECT_EQ(fnv(q.data(), q.size()), w.enc) << "bits " << w.bits;
    auto out = decode(q, n, w.bits, HVDS_FLOAT32);
    EXPECT_EQ(fnv(out.data(), out.size()), w.dec) << "bits " << w.bits;
  }
  EXPECT_EQ(hvds__quant_seed(1, 2, 3), 0x904a6e8ff8c23a56ULL);
}
