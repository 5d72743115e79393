// The caller's entries taken in two steps (sparse_input.h): which inputs wait to be ordered, and
// that a deferred input counts, orders and scatters to the same bits as one ordered at once.
#include "sparse_input.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

struct Entries {
  hvds_sparse_layout_t lay;
  std::vector<char> idx, val;
  size_t nnz;
};

// nnz entries drawn over [0, dim) (duplicates and any order), or ascending when sorted; values
// chosen so that summing duplicates in another order would change the bits (1e8 next to 1, and
// -0.0).
Entries draw(hvds_sparse_layout_t lay, size_t nnz, uint64_t seed, bool sorted = false) {
  std::mt19937_64 rng(seed);
  Entries e{lay, std::vector<char>(nnz * hvds__sparse_idx_bytes(&lay)),
            std::vector<char>(nnz * hvds__sparse_row_bytes(&lay)), nnz};
  const double pool[] = {1e8, 1.0, -1e8, -0.0, 0.5, 3.0};
  size_t vb = hvds__sparse_row_bytes(&lay) / lay.row;
  for (size_t i = 0; i < nnz; i++) {
    int64_t x = sorted ? (int64_t)(i * (lay.dim / nnz)) : (int64_t)(rng() % lay.dim);
    hvds__sparse_idx_set(&lay, e.idx.data(), i, x);
    for (size_t c = 0; c < lay.row; c++) {
      double v = pool[rng() % 6];
      char* at = e.val.data() + (i * lay.row + c) * vb;
      if (lay.dtype == HVDS_FLOAT32) {
        float f = (float)v;
        std::memcpy(at, &f, sizeof f);
      } else if (lay.dtype == HVDS_FLOAT64) {
        std::memcpy(at, &v, sizeof v);
      } else {
        int32_t n = (int32_t)(rng() % 1000) - 500;
        std::memcpy(at, &n, sizeof n);
      }
    }
  }
  return e;
}

hvds_result_t take(const Entries& e, int ranges, int may_defer, hvds_sparse_input_t* in) {
  return hvds__sparse_input_take(&e.lay, e.idx.data(), e.val.data(), e.nnz, ranges, may_defer, in);
}

std::vector<char> stream_bytes(const hvds_sparse_layout_t& lay, const hvds_sstream_t& s) {
  return std::vector<char>(s.base, s.base + hvds__sstream_bytes(&lay, s.n, s.dense));
}

std::vector<char> to_dense(hvds_sparse_input_t* in) {
  std::vector<char> d(in->lay.dim * hvds__sparse_row_bytes(&in->lay), 0x5a);
  hvds__sparse_input_to_dense(in, d.data());
  return d;
}

}  // namespace

TEST(SparseInput, OnlyUnsortedInputsWithSmallMarksWait) {
  hvds_sparse_layout_t lay = {1 << 16, 1, HVDS_FLOAT32, HVDS_INT32};
  hvds_sparse_input_t in;
  struct {
    size_t nnz;
    bool sorted;
    int may_defer;
    int deferred;
  } cases[] = {
      {8192, false, 1, 1},  // unsorted, 8 indices per entry: waits
      {8192, false, 0, 0},  // the caller wants it ordered (a sparse algorithm was forced)
      {8192, true, 1, 0},   // sorted: copied at once, nothing to save
      {4096, false, 1, 0},  // 16 indices per entry or more: too sparse for the dense allreduce
      {4097, false, 1, 1},
  };
  for (const auto& c : cases) {
    Entries e = draw(lay, c.nnz, 7, c.sorted);
    ASSERT_EQ(take(e, 4, c.may_defer, &in), HVDS_SUCCESS);
    EXPECT_EQ(in.deferred, c.deferred) << c.nnz << (c.sorted ? " sorted" : " unsorted");
    EXPECT_EQ(in.stream.n, in.entries);
    if (c.deferred) {
      EXPECT_LT(in.scatter_steps, in.chk.steps);  // the sort is what it saves
    } else {
      EXPECT_EQ(in.scatter_steps, in.chk.steps);
    }
    hvds__sparse_input_free(&in);
  }
}

TEST(SparseInput, DeferredCountsOrdersAndScattersAsTheOrderedStream) {
  const hvds_sparse_layout_t layouts[] = {{5000, 1, HVDS_FLOAT32, HVDS_INT32},
                                          {5000, 1, HVDS_FLOAT64, HVDS_INT64},
                                          {777, 3, HVDS_FLOAT32, HVDS_INT32},
                                          {4093, 1, HVDS_INT32, HVDS_INT64},
                                          // larger than a core's caches
                                          {(1 << 18) + 5, 1, HVDS_FLOAT32, HVDS_INT64},
                                          {1 << 17, 1, HVDS_INT32, HVDS_INT32}};
  for (const auto& lay : layouts) {
    // From a sparse stream to one the byte rule makes dense, with duplicates throughout.
    for (size_t nnz : {lay.dim / 10, lay.dim / 5, lay.dim, 3 * lay.dim}) {
      for (int ranges : {1, 3, 4, 8}) {
        Entries e = draw(lay, nnz, nnz * 31 + ranges);
        std::string what = "dim " + std::to_string(lay.dim) + "x" + std::to_string(lay.row) +
                           " dtype " + std::to_string(lay.dtype) + " nnz " + std::to_string(nnz) +
                           " ranges " + std::to_string(ranges);
        hvds_sparse_input_t now, later, scattered;
        ASSERT_EQ(take(e, ranges, 0, &now), HVDS_SUCCESS);
        ASSERT_EQ(take(e, ranges, 1, &later), HVDS_SUCCESS);
        ASSERT_EQ(take(e, ranges, 1, &scattered), HVDS_SUCCESS);
        ASSERT_EQ(later.deferred, 1) << what;
        EXPECT_EQ(later.entries, now.entries) << what;
        EXPECT_EQ(later.imbalance, now.imbalance) << what;
        EXPECT_EQ(later.stream.dense, now.stream.dense) << what;
        hvds__sparse_input_order(&later);
        EXPECT_EQ(later.deferred, 0);
        EXPECT_EQ(stream_bytes(lay, later.stream), stream_bytes(lay, now.stream)) << what;
        EXPECT_EQ(to_dense(&scattered), to_dense(&now)) << what;  // bit for bit
        EXPECT_EQ(scattered.deferred, 0);
        hvds__sparse_input_free(&now);
        hvds__sparse_input_free(&later);
        hvds__sparse_input_free(&scattered);
      }
    }
  }
}

TEST(SparseInput, BadInputIsJudgedBeforeAnythingWaits) {
  hvds_sparse_layout_t lay = {1000, 1, HVDS_FLOAT32, HVDS_INT32};
  Entries e = draw(lay, 500, 3);
  hvds__sparse_idx_set(&lay, e.idx.data(), 321, 1000);
  hvds_sparse_input_t in;
  EXPECT_EQ(take(e, 4, 1, &in), HVDS_INVALID_ARGUMENT);
  EXPECT_EQ(in.chk.status, HVDS_SPARSE_INPUT_BAD_INDEX);
  EXPECT_EQ(in.chk.index, 1000);
  EXPECT_EQ(in.chk.position, 321u);
  EXPECT_EQ(in.deferred, 0);
  hvds__sparse_input_free(&in);
  EXPECT_EQ(hvds__sparse_input_take(&lay, nullptr, e.val.data(), 500, 4, 1, &in),
            HVDS_INVALID_ARGUMENT);
  EXPECT_EQ(in.chk.status, HVDS_SPARSE_INPUT_NULL);
  hvds__sparse_input_free(&in);
}
