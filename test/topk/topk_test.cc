// hvds_topk_feedback (ops/topk.c): the exact top k against a stable sort for both element types,
// both index types, exact and sampled selection, ties, zeros, NaN, error feedback's bookkeeping
// (sent + residual = accumulated gradient), and the argument checks of the public entry.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "hvdsparse.h"
#include "topk.h"

namespace {

template <typename T>
constexpr hvds_dtype_t dtype_of() {
  return sizeof(T) == 4 ? HVDS_FLOAT32 : HVDS_FLOAT64;
}

// Indices of the k largest |v| (non-zero only), ties to the lower index, in increasing order.
template <typename T>
std::vector<int64_t> sort_topk(const std::vector<T>& v, int64_t k) {
  std::vector<int64_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  auto mag = [&](int64_t i) {
    return std::isnan(v[i]) ? std::numeric_limits<double>::infinity() * 2 : std::fabs((double)v[i]);
  };
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    bool na = std::isnan(v[a]), nb = std::isnan(v[b]);
    if (na != nb) return na;
    return mag(a) > mag(b);
  });
  std::vector<int64_t> out;
  for (int64_t i = 0; i < (int64_t)order.size() && (int64_t)out.size() < k; i++)
    if (v[order[i]] != 0) out.push_back(order[i]);
  std::sort(out.begin(), out.end());
  return out;
}

struct Result {
  std::vector<int64_t> idx;
  std::vector<double> vals;
  int32_t exact = -1;
};

template <typename T>
Result run(std::vector<T>& acc, const std::vector<T>* grad, hvds_topk_plan_t plan,
           hvds_dtype_t index_dtype = HVDS_INT32) {
  std::vector<int64_t> idx64(plan.k + 1, -7);
  std::vector<int32_t> idx32(plan.k + 1, -7);
  std::vector<T> vals(plan.k + 1, (T)-7);
  int64_t count = -1;
  Result r;
  void* idx = index_dtype == HVDS_INT32 ? (void*)idx32.data() : (void*)idx64.data();
  EXPECT_EQ(hvds_topk_feedback(acc.data(), grad ? grad->data() : nullptr, dtype_of<T>(),
                               (int64_t)acc.size(), &plan, idx, index_dtype, vals.data(), &count,
                               &r.exact),
            HVDS_SUCCESS)
      << hvds_last_error();
  EXPECT_GE(count, 0);
  EXPECT_LE(count, plan.k);
  EXPECT_EQ(vals[plan.k], (T)-7) << "wrote past k values";
  for (int64_t i = 0; i < count; i++) {
    r.idx.push_back(index_dtype == HVDS_INT32 ? idx32[i] : idx64[i]);
    r.vals.push_back((double)vals[i]);
  }
  return r;
}

// n values of distinct magnitudes in random order, random signs.
template <typename T>
std::vector<T> distinct(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<T> v(n);
  for (int64_t i = 0; i < n; i++) v[i] = (T)((double)(i + 1) / (double)n) * (rng() & 1 ? 1 : -1);
  std::shuffle(v.begin(), v.end(), rng);
  return v;
}

// The plan of Compression.topk (hvdsparse/common/topk.py): a 1% sample, the threshold at
// oversample times the expected count of top-k entries in it plus `margin` standard deviations.
hvds_topk_plan_t sampled_plan(int64_t n, int64_t k, double oversample, uint64_t seed,
                              double margin = 3) {
  int64_t m = std::min<int64_t>(n, std::max<int64_t>(1024, n / 100));
  double expected = (double)k * m / n;
  int64_t rank = (int64_t)std::ceil(oversample * expected + margin * std::sqrt(expected)) + 1;
  return {k, m, std::min(m, rank), seed};
}

template <typename T>
void expect_topk(const std::vector<T>& before, const std::vector<T>& after, const Result& r,
                 int64_t k) {
  EXPECT_EQ(r.idx, sort_topk(before, k));
  for (size_t j = 0; j < r.idx.size(); j++) {
    EXPECT_EQ((T)r.vals[j], before[r.idx[j]]);
    EXPECT_EQ(after[r.idx[j]], (T)0) << "a sent entry stays in the residual";
  }
  std::vector<char> sent(before.size(), 0);
  for (int64_t i : r.idx) sent[i] = 1;
  for (size_t i = 0; i < before.size(); i++)
    if (!sent[i]) {
      if (std::isnan(before[i]))
        EXPECT_TRUE(std::isnan(after[i]));
      else
        EXPECT_EQ(after[i], before[i]) << "entry " << i << " not sent but changed";
    }
}

template <typename T>
class TopK : public ::testing::Test {};
using Types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(TopK, Types);

TYPED_TEST(TopK, ExactMatchesSortForEverySizeAndRatio) {
  using T = TypeParam;
  for (int64_t n : {1, 2, 5, 100, 1000, 65535}) {
    for (double ratio : {0.001, 0.01, 0.1, 0.5, 1.0}) {
      int64_t k = std::min<int64_t>(n, std::max<int64_t>(1, (int64_t)std::ceil(ratio * n)));
      auto acc = distinct<T>(n, (uint32_t)n);
      auto before = acc;
      Result r = run<T>(acc, nullptr, {k, 0, 0, 0});
      EXPECT_EQ(r.exact, 1);
      ASSERT_EQ((int64_t)r.idx.size(), k) << "n " << n << " ratio " << ratio;
      expect_topk(before, acc, r, k);
    }
  }
}

TYPED_TEST(TopK, SampledThresholdGivesTheExactTopK) {
  using T = TypeParam;
  const int64_t n = 1 << 18;
  for (double ratio : {0.001, 0.01, 0.05}) {
    int64_t k = (int64_t)std::ceil(ratio * n);
    for (uint32_t seed = 0; seed < 3; seed++) {
      auto acc = distinct<T>(n, seed);
      auto before = acc;
      Result r = run<T>(acc, nullptr, sampled_plan(n, k, 1.5, seed), HVDS_INT64);
      EXPECT_EQ(r.exact, 0) << "the threshold with its margin should hold the top k";
      ASSERT_EQ((int64_t)r.idx.size(), k);
      expect_topk(before, acc, r, k);
    }
  }
}

TYPED_TEST(TopK, UnluckySampleFallsBackToTheExactSelection) {
  using T = TypeParam;
  const int64_t n = 1 << 17, k = n / 100;
  int fallbacks = 0;
  for (uint32_t seed = 0; seed < 12; seed++) {
    auto acc = distinct<T>(n, 100 + seed);
    auto before = acc;
    Result r = run<T>(acc, nullptr, sampled_plan(n, k, 1.0, seed, 0));  // near the k-th
    fallbacks += r.exact;
    ASSERT_EQ((int64_t)r.idx.size(), k);
    expect_topk(before, acc, r, k);
  }
  EXPECT_GT(fallbacks, 0);
}

TYPED_TEST(TopK, TiesGoToTheLowerIndicesAndTheCountStaysK) {
  using T = TypeParam;
  const int64_t n = 1 << 17, k = n / 100;
  std::vector<T> acc(n, (T)1);  // every candidate ties: more than the buffer holds
  Result r = run<T>(acc, nullptr, sampled_plan(n, k, 1.5, 3));
  EXPECT_EQ(r.exact, 1);
  ASSERT_EQ((int64_t)r.idx.size(), k);
  for (int64_t j = 0; j < k; j++) EXPECT_EQ(r.idx[j], j);
  for (int64_t j = 0; j < n; j++) EXPECT_EQ(acc[j], j < k ? (T)0 : (T)1);
}

// The sampled path with many candidates of equal magnitude at the k-th: the candidates' own
// selection breaks the ties by index as the exact path does.
TYPED_TEST(TopK, SampledTiesAtTheKthGoToTheLowerIndices) {
  using T = TypeParam;
  const int64_t n = (1 << 18) + 13, k = n / 100;
  std::mt19937 rng(11);
  std::vector<T> acc(n);
  for (int64_t i = 0; i < n; i++) {
    uint32_t r = rng() % 1000;  // 0.5% at 3, 1% at 2 (the k-th falls among them), rest below 1
    acc[i] = r < 5 ? (T)3 : r < 15 ? (T)-2 : (T)((double)(rng() % 1000000 + 1) * 1e-6);
  }
  auto before = acc;
  Result r = run<T>(acc, nullptr, sampled_plan(n, k, 1.5, 2));
  EXPECT_EQ(r.exact, 0);
  ASSERT_EQ((int64_t)r.idx.size(), k);
  expect_topk(before, acc, r, k);
}

// Samples longer than the tensor, tensors shorter than a sampled run and lengths that are no
// multiple of it: the sample stays inside acc and the result is the exact top k.
TYPED_TEST(TopK, SampleRunsStayInsideAnyLength) {
  using T = TypeParam;
  for (int64_t n : {3, 15, 16, 17, 100, 1001}) {
    for (int64_t m : {1, 7, 16, 40, 2000}) {
      int64_t k = std::max<int64_t>(1, n / 10);
      auto acc = distinct<T>(n, (uint32_t)(n * 7 + m));
      auto before = acc;
      Result r = run<T>(acc, nullptr, {k, m, std::min<int64_t>(m, 2), (uint64_t)m});
      ASSERT_EQ((int64_t)r.idx.size(), k) << "n " << n << " sample " << m;
      expect_topk(before, acc, r, k);
    }
  }
}

TYPED_TEST(TopK, ZerosAreNeverSent) {
  using T = TypeParam;
  const int64_t n = 100000, k = 1000;
  std::vector<T> acc(n, (T)0);
  for (int64_t i = 0; i < 300; i++) acc[i * 331] = (T)(i % 2 ? -(i + 1) : (i + 1));
  auto before = acc;
  for (hvds_topk_plan_t plan : {hvds_topk_plan_t{k, 0, 0, 0}, sampled_plan(n, k, 1.5, 9)}) {
    acc = before;
    Result r = run<T>(acc, nullptr, plan);
    ASSERT_EQ(r.idx.size(), 300u) << "sample " << plan.sample;
    expect_topk(before, acc, r, k);
  }
  std::vector<T> zeros(n, (T)0);
  Result r = run<T>(zeros, nullptr, sampled_plan(n, k, 1.5, 1));
  EXPECT_TRUE(r.idx.empty());
}

TYPED_TEST(TopK, NanAndInfinityAreSentFirst) {
  using T = TypeParam;
  auto acc = distinct<T>(5000, 4);
  acc[17] = std::numeric_limits<T>::quiet_NaN();
  acc[4000] = -std::numeric_limits<T>::infinity();
  auto before = acc;
  Result r = run<T>(acc, nullptr, {3, 0, 0, 0});
  ASSERT_EQ(r.idx.size(), 3u);
  EXPECT_EQ(r.idx[0], 17);
  EXPECT_TRUE(std::isnan(r.vals[0]));
  EXPECT_EQ(r.idx[2], 4000);
  EXPECT_EQ(r.idx, sort_topk(before, 3));
}

// Error feedback over many steps: what was sent plus the residual is the sum of the gradients
// (nothing lost), every step sends the top k of residual + gradient, and the residual stays
// within the bound sqrt(4 (1 - d)) / d * |g| (d = k / n).
TYPED_TEST(TopK, ErrorFeedbackKeepsEveryGradient) {
  using T = TypeParam;
  const int64_t n = 1 << 17, k = n / 100;
  std::mt19937 rng(5);
  std::normal_distribution<double> normal;
  std::vector<T> residual(n, (T)0), grad(n);
  std::vector<double> sent(n, 0), total(n, 0);
  double bound = 0, worst = 0;
  for (int step = 0; step < 30; step++) {
    double gnorm = 0;
    for (int64_t i = 0; i < n; i++) {
      grad[i] = (T)normal(rng);
      total[i] += grad[i];
      gnorm += (double)grad[i] * grad[i];
    }
    std::vector<T> acc = residual;
    for (int64_t i = 0; i < n; i++) acc[i] += grad[i];
    Result r = run<T>(residual, &grad, sampled_plan(n, k, 1.5, step));
    ASSERT_EQ((int64_t)r.idx.size(), k);
    expect_topk(acc, residual, r, k);
    for (size_t j = 0; j < r.idx.size(); j++) sent[r.idx[j]] += r.vals[j];
    double rnorm = 0, tol = sizeof(T) == 4 ? 1e-3 : 1e-9;
    for (int64_t i = 0; i < n; i++) {
      ASSERT_NEAR(sent[i] + residual[i], total[i], tol * (1 + std::fabs(total[i])));
      rnorm += (double)residual[i] * residual[i];
    }
    double d = (double)k / n;
    bound = std::max(bound, std::sqrt(4 * (1 - d)) / d * std::sqrt(gnorm));
    worst = std::max(worst, std::sqrt(rnorm));
  }
  EXPECT_LT(worst, bound);
}

TEST(TopKApi, BadArgumentsAreNamedAndChangeNothing) {
  std::vector<float> acc(100, 1.0f);
  std::vector<int32_t> idx(10);
  std::vector<float> vals(10);
  int64_t count = -1;
  hvds_topk_plan_t plan{10, 0, 0, 0};
  struct Case {
    hvds_dtype_t dtype, index;
    int64_t n;
    hvds_topk_plan_t plan;
    const char* says;
  } cases[] = {
      {HVDS_FLOAT16, HVDS_INT32, 100, plan, "FLOAT16"},
      {HVDS_FLOAT32, HVDS_FLOAT32, 100, plan, "index dtype"},
      {HVDS_FLOAT32, HVDS_INT32, -1, plan, "elements"},
      {HVDS_FLOAT32, HVDS_INT32, (int64_t)INT32_MAX + 1, plan, "INT32"},
      {HVDS_FLOAT32, HVDS_INT32, 100, {-1, 0, 0, 0}, "negative"},
      {HVDS_FLOAT32, HVDS_INT32, 100, {10, 50, 0, 0}, "sample_rank"},
      {HVDS_FLOAT32, HVDS_INT32, 100, {10, 50, 51, 0}, "sample_rank"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(hvds_topk_feedback(acc.data(), nullptr, c.dtype, c.n, &c.plan, idx.data(), c.index,
                                 vals.data(), &count, nullptr),
              HVDS_INVALID_ARGUMENT);
    EXPECT_NE(std::string(hvds_last_error()).find(c.says), std::string::npos) << hvds_last_error();
    EXPECT_EQ(count, 0);
  }
  EXPECT_EQ(hvds_topk_feedback(nullptr, nullptr, HVDS_FLOAT32, 100, &plan, idx.data(), HVDS_INT32,
                               vals.data(), &count, nullptr),
            HVDS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hvds_last_error()).find("acc"), std::string::npos);
  EXPECT_EQ(hvds_topk_feedback(acc.data(), nullptr, HVDS_FLOAT32, 100, nullptr, idx.data(),
                               HVDS_INT32, vals.data(), &count, nullptr),
            HVDS_INVALID_ARGUMENT);
  for (float v : acc) EXPECT_EQ(v, 1.0f);
  // Nothing to select: no output touched, grad still added.
  std::vector<float> grad(100, 2.0f);
  hvds_topk_plan_t none{0, 0, 0, 0};
  EXPECT_EQ(hvds_topk_feedback(acc.data(), grad.data(), HVDS_FLOAT32, 100, &none, nullptr,
                               HVDS_INT32, nullptr, &count, nullptr),
            HVDS_SUCCESS);
  EXPECT_EQ(count, 0);
  EXPECT_EQ(acc[0], 3.0f);
}

}  // namespace
