// Every sparse allreduce algorithm against the dense reference, ranks as threads: generators
// (uniform, Zipf, controlled overlap, identical, disjoint, partly empty, empty, all dense) x
// layouts (int32/int64 indices, COO and row-sparse, low and high density) x value dtypes, for
// 1 to 8 ranks, sparse and dense outputs, Sum and Average. Results must also be bitwise
// identical on every rank.
#include <gtest/gtest.h>

#include <tuple>

#include "sparse_test_util.h"

using namespace sparse_test;

namespace {

struct LayoutCase {
  hvds_dtype_t index_dtype;
  size_t dim, row, k;
};

// COO and row-sparse, both index types; the last one is dense enough that unions switch to
// dense part way through the algorithms.
const LayoutCase kLayouts[] = {{HVDS_INT32, 997, 1, 40},
                               {HVDS_INT64, 1000, 1, 12},
                               {HVDS_INT32, 61, 3, 6},
                               {HVDS_INT64, 64, 4, 9},
                               {HVDS_INT32, 500, 1, 120}};
const hvds_dtype_t kDtypes[] = {HVDS_FLOAT32, HVDS_INT32,   HVDS_INT64,
                                HVDS_FLOAT64, HVDS_FLOAT16, HVDS_BFLOAT16};

const hvds_sparse_algo_t kAlgos[] = {HVDS_SPARSE_DENSE,   HVDS_SPARSE_ALLGATHER,
                                     HVDS_SPARSE_SSAR_RD, HVDS_SPARSE_SSAR_SAG,
                                     HVDS_SPARSE_DSAR,    HVDS_SPARSE_ZEN};

using Param = std::tuple<hvds_sparse_algo_t, int>;

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return std::string(hvds__sparse_algo_name(std::get<0>(info.param))) + "_np" +
         std::to_string(std::get<1>(info.param));
}

}  // namespace

// Every generator and layout through algo on P ranks (pack: hvds_sparse_opts_t.pack_indices).
static void every_generator_and_layout(hvds_sparse_algo_t algo, int P, int pack) {
  int n = 0;
  for (int g = 0; g < kGenCount; g++) {
    for (const LayoutCase& l : kLayouts) {
      Case cs;
      cs.algo = algo;
      cs.P = P;
      cs.pack = pack;
      cs.gen = g;
      cs.dim = l.dim;
      cs.row = l.row;
      cs.k = l.k;
      cs.index_dtype = l.index_dtype;
      cs.dtype = kDtypes[n % 6];
      cs.dense_out = (n / 6) % 2;
      cs.op = n % 5 == 4 ? HVDS_AVERAGE : HVDS_SUM;
      cs.seed = static_cast<uint64_t>(n + 1);
      n++;
      run_case(cs);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

class SparseAllreduceTest : public ::testing::TestWithParam<Param> {};

TEST_P(SparseAllreduceTest, EveryGeneratorAndLayoutMatchesDenseReference) {
  auto [algo, P] = GetParam();
  every_generator_and_layout(algo, P, 0);
}

INSTANTIATE_TEST_SUITE_P(AllAlgorithms, SparseAllreduceTest,
                         ::testing::Combine(::testing::ValuesIn(kAlgos), ::testing::Range(1, 9)),
                         param_name);

// Recursive doubling's rounds and folds, split-allgather's folds and gather and ZEN's pull as
// packed blocks at full precision (indices delta-coded, values as they are): still exactly the
// dense reference, on 1 to 8 ranks.
class SparseAllreducePacked : public ::testing::TestWithParam<Param> {};

TEST_P(SparseAllreducePacked, EveryGeneratorAndLayoutMatchesDenseReference) {
  auto [algo, P] = GetParam();
  every_generator_and_layout(algo, P, 1);
}

INSTANTIATE_TEST_SUITE_P(PackingAlgorithms, SparseAllreducePacked,
                         ::testing::Combine(::testing::Values(HVDS_SPARSE_SSAR_RD,
                                                              HVDS_SPARSE_SSAR_SAG,
                                                              HVDS_SPARSE_ZEN),
                                            ::testing::Range(1, 9)),
                         param_name);

static std::string algo_name(const ::testing::TestParamInfo<hvds_sparse_algo_t>& info) {
  return hvds__sparse_algo_name(info.param);
}

// Every value dtype once (bool and the narrow integers included), Sum, on 3 ranks.
class SparseAllreduceDtypes : public ::testing::TestWithParam<hvds_sparse_algo_t> {};

TEST_P(SparseAllreduceDtypes, EveryValueDtype) {
  for (int t = 0; t < HVDS_DTYPE_COUNT; t++) {
    Case cs;
    cs.algo = GetParam();
    cs.P = 3;
    cs.dim = 300;
    cs.k = 20;
    cs.dtype = static_cast<hvds_dtype_t>(t);
    cs.seed = 100 + t;
    run_case(cs);
    if (HasFatalFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(AllAlgorithms, SparseAllreduceDtypes, ::testing::ValuesIn(kAlgos),
                         algo_name);

// Tensors with fewer indices than ranks (empty ranges and partitions), down to dim 0.
TEST_P(SparseAllreduceDtypes, TinyDimensions) {
  int n = 0;
  for (size_t dim : {0, 1, 3, 7}) {
    for (int P : {1, 2, 3, 5, 8}) {
      for (int g : {kUniform, kIdentical, kAllDense}) {
        Case cs;
        cs.algo = GetParam();
        cs.P = P;
        cs.gen = g;
        cs.dim = dim;
        cs.row = n % 2 ? 2 : 1;
        cs.k = 1;
        cs.dense_out = n % 3 == 0;
        cs.seed = 200 + n++;
        run_case(cs);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Larger tensors on 8 ranks: every algorithm, skewed (Zipf) and uniform supports, and Zipf
// with packed gathers.
class SparseAllreduceLarge : public ::testing::TestWithParam<hvds_sparse_algo_t> {};

TEST_P(SparseAllreduceLarge, EightRanksSkewedAndUniform) {
  struct {
    int gen, pack;
  } runs[] = {{kZipf, 0}, {kUniform, 0}, {kOverlap, 0}, {kZipf, 1}};
  for (auto [g, pack] : runs) {
    Case cs;
    cs.pack = pack;
    cs.algo = GetParam();
    cs.P = 8;
    cs.gen = g;
    cs.dim = 100000;
    cs.k = 1500;
    cs.index_dtype = HVDS_INT64;
    cs.seed = 7 + g;
    run_case(cs);
    if (HasFatalFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(AllAlgorithms, SparseAllreduceLarge, ::testing::ValuesIn(kAlgos),
                         algo_name);

// AUTO runs whatever the cost model picks and still matches the reference.
TEST(SparseAllreduceAuto, PicksAndMatchesReference) {
  for (int g : {kUniform, kAllDense, kZipf}) {
    for (int P : {2, 5, 8}) {
      Case cs;
      cs.P = P;
      cs.gen = g;
      cs.seed = 40 + P + g;
      run_case(cs);
      if (HasFatalFailure()) return;
    }
  }
}

// ZEN balances skewed (Zipf) indices: push and pull imbalance near 1 on 8 ranks.
TEST(SparseZen, BalancesSkewedIndices) {
  const int P = 8;
  const size_t dim = 1 << 18, row = 1;
  std::vector<double> push(P), pull(P);
  inproc_spawn(P, [&](hvds_p2p_t* p) {
    Input in = make_input(kZipf, P, p->rank, dim, row, 20000, HVDS_FLOAT32, 3);
    Case cs;
    cs.dim = dim;
    std::vector<char> idx, val;
    encode(in, cs, &idx, &val);
    hvds_sparse_layout_t lay = {dim, row, HVDS_FLOAT32, HVDS_INT32};
    hvds_sparse_opts_t o = HVDS_SPARSE_OPTS_INIT;
    o.algorithm = HVDS_SPARSE_ZEN;
    hvds_sparse_result_t res{};
    ASSERT_EQ(
        hvds__sparse_allreduce(p, &lay, idx.data(), val.data(), in.idx.size(), HVDS_SUM, &o, &res),
        HVDS_SUCCESS)
        << p->error;
    push[p->rank] = res.push_imbalance;
    pull[p->rank] = res.pull_imbalance;
    hvds__sparse_result_free(&res);
  });
  for (int r = 0; r < P; r++) {
    EXPECT_GE(push[r], 1.0);
    EXPECT_LT(push[r], 1.25) << "rank " << r;
    EXPECT_GE(pull[r], 1.0);
    EXPECT_LT(pull[r], 1.25) << "rank " << r;
    EXPECT_EQ(pull[r], pull[0]);
  }
}

// Every rank passes a different key: rank 0's is used everywhere (otherwise owners would
// disagree and the sums would be wrong), and any key gives the same sums.
TEST(SparseZen, KeyFromRankZero) {
  for (uint64_t base : {uint64_t{0}, uint64_t{1}, uint64_t{0xdeadbeef}, ~uint64_t{0} - 8}) {
    inproc_spawn(4, [&](hvds_p2p_t* p) {
      hvds_sparse_layout_t lay = {100, 1, HVDS_INT32, HVDS_INT32};
      int32_t idx[4] = {static_cast<int32_t>(p->rank), 50, 99, 60 + p->rank};
      int32_t val[4] = {1, 2, 3, 1};
      hvds_sparse_opts_t o = HVDS_SPARSE_OPTS_INIT;
      o.algorithm = HVDS_SPARSE_ZEN;
      o.zen_seed = base + static_cast<uint64_t>(p->rank);
      std::vector<int32_t> dense(100, -1);
      hvds_sparse_result_t res{};
      res.dense_out = dense.data();
      ASSERT_EQ(hvds__sparse_allreduce(p, &lay, idx, val, 4, HVDS_SUM, &o, &res), HVDS_SUCCESS)
          << p->error;
      for (int i = 0; i < 100; i++) {
        int want = (i < 4) + (i >= 60 && i < 64) + (i == 50 ? 8 : 0) + (i == 99 ? 12 : 0);
        ASSERT_EQ(dense[i], want) << "index " << i;
      }
    });
  }
}

// The dense baseline builds its result in the caller's dense output; an input that lies inside
// that output (values or indices; sorted, or unsorted and dense enough that its ordering is
// deferred and the entries are scattered straight from the caller's arrays) must still be read
// before it is overwritten.
TEST(SparseAllreduceDenseOut, InputInsideTheOutput) {
  const int kEntries = 20;  // one per 5 indices: deferred when unsorted
  for (hvds_sparse_algo_t algo : {HVDS_SPARSE_DENSE, HVDS_SPARSE_AUTO, HVDS_SPARSE_SSAR_RD}) {
    for (int where = 0; where < 3; where++) {  // 0: apart, 1: values inside, 2: indices inside
      for (bool sorted : {true, false}) {
        inproc_spawn(3, [&](hvds_p2p_t* p) {
          hvds_sparse_layout_t lay = {100, 1, HVDS_FLOAT32, HVDS_INT32};
          std::vector<int32_t> idx_apart(kEntries);
          std::vector<float> val_apart(kEntries);
          for (int i = 0; i < kEntries; i++) {  // rank r sends index 5i + r with value i + 1
            int e = sorted ? i : kEntries - 1 - i;
            idx_apart[e] = 5 * i + p->rank;
            val_apart[e] = static_cast<float>(i + 1);
          }
          std::vector<float> dense(100, -1.0f);
          int32_t* idx = idx_apart.data();
          float* val = val_apart.data();
          if (where == 1)
            val = std::copy(val_apart.begin(), val_apart.end(), &dense[10]) - kEntries;
          if (where == 2) {
            idx = reinterpret_cast<int32_t*>(&dense[40]);
            std::copy(idx_apart.begin(), idx_apart.end(), idx);
          }
          hvds_sparse_opts_t o = HVDS_SPARSE_OPTS_INIT;
          o.algorithm = algo;
          hvds_sparse_result_t res{};
          res.dense_out = dense.data();
          ASSERT_EQ(hvds__sparse_allreduce(p, &lay, idx, val, kEntries, HVDS_SUM, &o, &res),
                    HVDS_SUCCESS)
              << p->error;
          for (int j = 0; j < 100; j++) {
            float want = j % 5 < 3 ? static_cast<float>(j / 5 + 1) : 0.0f;
            ASSERT_EQ(dense[j], want)
                << "index " << j << ", algorithm " << hvds__sparse_algo_name(algo) << ", case "
                << where << (sorted ? " sorted" : " unsorted");
          }
        });
      }
    }
  }
}

// Every rank passes a different overlap estimate: rank 0's reaches every rank's selector, so the
// pick is the same everywhere and is the model's for that overlap; the union size is reported.
TEST(SparseAllreduceOverlap, RankZerosEstimateEverywhere) {
  const int P = 4;
  const size_t dim = 1 << 16, k = 20000;  // 30%: dense unless the supports are known to match
  std::set<int> picks;
  for (double w0 : {-1.0, 0.0, 1.0}) {
    std::vector<hvds_sparse_algo_t> algo(P);
    std::vector<double> seen(P);
    std::vector<size_t> uni(P);
    inproc_spawn(P, [&](hvds_p2p_t* p) {
      Input in = make_input(kIdentical, P, p->rank, dim, 1, k, HVDS_FLOAT32, 5);
      std::fill(in.val.begin(), in.val.end(), 1.0);  // no row sums to zero: the union is k
      Case cs;
      cs.dim = dim;
      std::vector<char> idx, val;
      encode(in, cs, &idx, &val);
      hvds_sparse_layout_t lay = {dim, 1, HVDS_FLOAT32, HVDS_INT32};
      hvds_sparse_opts_t o = HVDS_SPARSE_OPTS_INIT;
      o.overlap = p->rank == 0 ? w0 : 0.5;
      o.pack_indices = -1;  // with free coding (no local work priced) packing would always win
      hvds_sparse_result_t res{};
      ASSERT_EQ(hvds__sparse_allreduce(p, &lay, idx.data(), val.data(), in.idx.size(), HVDS_SUM, &o,
                                       &res),
                HVDS_SUCCESS)
          << p->error;
      algo[p->rank] = res.algorithm;
      seen[p->rank] = res.overlap;
      uni[p->rank] = res.union_nnz;
      hvds__sparse_result_free(&res);
    });
    hvds_sparse_problem_t x = {P, double(dim), 1, 4, 4, double(k), w0, 0, 0, 0, -1, 0, 0};
    hvds_sparse_algo_t want = hvds__sparse_select(&x, nullptr, nullptr);
    picks.insert(want);
    for (int r = 0; r < P; r++) {
      EXPECT_EQ(algo[r], want) << "rank " << r << " overlap " << w0;
      EXPECT_EQ(seen[r], w0) << "rank " << r;
      EXPECT_EQ(uni[r], k) << "rank " << r;  // identical supports
    }
  }
  EXPECT_GT(picks.size(), 1u) << "the overlap should change the pick here";
}

TEST(SparseRegistry, NamesRoundTrip) {
  for (int a = HVDS_SPARSE_AUTO; a < HVDS_SPARSE_ALGO_COUNT; a++) {
    const char* name = hvds__sparse_algo_name(static_cast<hvds_sparse_algo_t>(a));
    ASSERT_NE(name, nullptr);
    EXPECT_EQ(hvds__sparse_algo_from_name(name), a) << name;
  }
  EXPECT_STREQ(hvds__sparse_algo_name(HVDS_SPARSE_ZEN), "zen");
  EXPECT_STREQ(hvds__sparse_algo_name(HVDS_SPARSE_SSAR_RD), "ssar_recursive_doubling");
  EXPECT_EQ(hvds__sparse_algo_name(HVDS_SPARSE_ALGO_COUNT), nullptr);
  EXPECT_EQ(hvds__sparse_algo_from_name("nope"), HVDS_SPARSE_ALGO_COUNT);
  EXPECT_EQ(hvds__sparse_algo_from_name(nullptr), HVDS_SPARSE_ALGO_COUNT);
}
