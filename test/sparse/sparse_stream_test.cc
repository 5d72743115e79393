// The sparse stream on one thread: normalization (validation, sort, duplicate sums, the byte
// rule's threshold), merges (sparse, dense, the switch on the union, symmetry), the tree merge,
// the split into partitions, and the radix sort.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "reduce.h"
#include "sparse_input.h"

namespace {

hvds_sparse_layout_t coo(size_t dim, hvds_dtype_t t = HVDS_FLOAT32, hvds_dtype_t it = HVDS_INT32) {
  return {dim, 1, t, it};
}

// A stream from int64 indices and float values (converted to the layout's types).
hvds_sstream_t make(const hvds_sparse_layout_t& lay, const std::vector<int64_t>& idx,
                    const std::vector<float>& val) {
  std::vector<char> ib(idx.size() * hvds__sparse_idx_bytes(&lay));
  for (size_t i = 0; i < idx.size(); i++) hvds__sparse_idx_set(&lay, ib.data(), i, idx[i]);
  std::vector<float> v(val);
  EXPECT_EQ(lay.dtype, HVDS_FLOAT32);
  hvds_sparse_input_check_t chk;
  hvds_sstream_t s;
  EXPECT_EQ(hvds__sstream_from_input(&lay, ib.data(), v.data(), idx.size(), &chk, &s),
            HVDS_SUCCESS);
  return s;
}

std::vector<float> densify(const hvds_sparse_layout_t& lay, const hvds_sstream_t& s) {
  std::vector<float> d(lay.dim * lay.row, -1);
  hvds__sstream_to_dense(&lay, &s, d.data());
  return d;
}

std::vector<char> raw(const hvds_sparse_layout_t& lay, const hvds_sstream_t& s) {
  size_t b = hvds__sstream_bytes(&lay, s.n, s.dense);
  return std::vector<char>(s.base, s.base + b);
}

}  // namespace

TEST(SparseStream, SortedInputIsCopied) {
  auto lay = coo(10);
  hvds_sstream_t s = make(lay, {1, 4, 7}, {1, 2, 3});
  EXPECT_FALSE(s.dense);
  EXPECT_EQ(s.n, 3u);
  EXPECT_EQ(hvds__sstream_index(&lay, &s, 2), 7);
  EXPECT_EQ(densify(lay, s), (std::vector<float>{0, 1, 0, 0, 2, 0, 0, 3, 0, 0}));
  hvds__sstream_free(&s);
}

TEST(SparseStream, UnsortedDuplicatesAreSortedAndSummed) {
  for (hvds_dtype_t it : {HVDS_INT32, HVDS_INT64}) {
    auto lay = coo(100, HVDS_FLOAT32, it);
    hvds_sstream_t s = make(lay, {40, 3, 40, 99, 3, 0, 40}, {1, 2, 4, 8, 16, 32, 64});
    ASSERT_FALSE(s.dense);
    ASSERT_EQ(s.n, 4u);
    const float* v = reinterpret_cast<const float*>(hvds__sstream_val(&lay, &s));
    int64_t want_idx[] = {0, 3, 40, 99};
    float want_val[] = {32, 18, 69, 8};
    for (size_t i = 0; i < 4; i++) {
      EXPECT_EQ(hvds__sstream_index(&lay, &s, i), want_idx[i]);
      EXPECT_EQ(v[i], want_val[i]);
    }
    hvds__sstream_free(&s);
  }
}

// SparCML's byte rule: dense when n (isz + rb) >= N rb, ties dense.
TEST(SparseStream, ByteRuleThresholds) {
  auto i32f32 = coo(100, HVDS_FLOAT32, HVDS_INT32);  // delta = N / 2
  EXPECT_FALSE(hvds__sparse_dense_rule(&i32f32, 49, 100));
  EXPECT_TRUE(hvds__sparse_dense_rule(&i32f32, 50, 100));
  auto i64f32 = coo(99, HVDS_FLOAT32, HVDS_INT64);  // delta = N / 3
  EXPECT_FALSE(hvds__sparse_dense_rule(&i64f32, 32, 99));
  EXPECT_TRUE(hvds__sparse_dense_rule(&i64f32, 33, 99));
  auto i32f16 = coo(99, HVDS_FLOAT16, HVDS_INT32);  // delta = N / 3
  EXPECT_FALSE(hvds__sparse_dense_rule(&i32f16, 32, 99));
  EXPECT_TRUE(hvds__sparse_dense_rule(&i32f16, 33, 99));
  hvds_sparse_layout_t rows = {10, 4, HVDS_FLOAT32, HVDS_INT32};  // 20 n >= 16 N: n >= 0.8 N
  EXPECT_FALSE(hvds__sparse_dense_rule(&rows, 7, 10));
  EXPECT_TRUE(hvds__sparse_dense_rule(&rows, 8, 10));
  EXPECT_FALSE(hvds__sparse_dense_rule(&rows, 0, 0));
  // An input at the threshold becomes a dense stream.
  auto lay = coo(4);
  hvds_sstream_t s = make(lay, {3, 1}, {5, 6});
  EXPECT_TRUE(s.dense);
  EXPECT_EQ(s.n, 4u);
  EXPECT_EQ(densify(lay, s), (std::vector<float>{0, 6, 0, 5}));
  hvds__sstream_free(&s);
}

TEST(SparseStream, BadInputsAreReportedWithPosition) {
  auto lay = coo(10, HVDS_FLOAT32, HVDS_INT64);
  int64_t idx[] = {1, 2, 10, -1};
  float val[] = {1, 1, 1, 1};
  hvds_sparse_input_check_t chk;
  hvds_sstream_t s;
  EXPECT_EQ(hvds__sstream_from_input(&lay, idx, val, 4, &chk, &s), HVDS_INVALID_ARGUMENT);
  EXPECT_EQ(chk.status, HVDS_SPARSE_INPUT_BAD_INDEX);
  EXPECT_EQ(chk.index, 10);
  EXPECT_EQ(chk.position, 2u);
  EXPECT_EQ(s.base, nullptr);
  EXPECT_EQ(hvds__sstream_from_input(&lay, nullptr, val, 4, &chk, &s), HVDS_INVALID_ARGUMENT);
  EXPECT_EQ(chk.status, HVDS_SPARSE_INPUT_NULL);
  EXPECT_EQ(hvds__sstream_from_input(&lay, nullptr, nullptr, 0, &chk, &s), HVDS_SUCCESS);
  EXPECT_EQ(s.n, 0u);
}

TEST(SparseStream, LayoutCheck) {
  char err[256];
  hvds_sparse_layout_t ok = {10, 3, HVDS_BFLOAT16, HVDS_INT64};
  EXPECT_EQ(hvds__sparse_layout_check(&ok, err, sizeof err), HVDS_SUCCESS);
  hvds_sparse_layout_t bad = {size_t{1} << 32, 1, HVDS_FLOAT32, HVDS_INT32};
  EXPECT_EQ(hvds__sparse_layout_check(&bad, err, sizeof err), HVDS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err).find("not addressable"), std::string::npos) << err;
  bad = {10, 1, static_cast<hvds_dtype_t>(42), HVDS_INT32};
  EXPECT_EQ(hvds__sparse_layout_check(&bad, err, sizeof err), HVDS_INVALID_ARGUMENT);
}

TEST(SparseStream, MergeSparseSwitchesOnTheExactUnion) {
  auto lay = coo(10);  // dense from 5 entries on
  hvds_sstream_t a = make(lay, {1, 3, 5}, {1, 2, 3});
  hvds_sstream_t b = make(lay, {3, 5, 8}, {10, 20, 30});
  hvds_sstream_t m;
  // |a| + |b| = 6 would say dense, the union (4) says sparse.
  ASSERT_EQ(hvds__sstream_merge(&lay, &a, &b, 1, &m), HVDS_SUCCESS);
  EXPECT_FALSE(m.dense);
  EXPECT_EQ(m.n, 4u);
  EXPECT_EQ(densify(lay, m), (std::vector<float>{0, 1, 0, 12, 0, 23, 0, 0, 30, 0}));
  hvds_sstream_t c = make(lay, {0, 9}, {7, 7});
  hvds_sstream_t m2;
  ASSERT_EQ(hvds__sstream_merge(&lay, &m, &c, 1, &m2), HVDS_SUCCESS);
  EXPECT_TRUE(m2.dense);
  EXPECT_EQ(densify(lay, m2), (std::vector<float>{7, 1, 0, 12, 0, 23, 0, 0, 30, 7}));
  // Unranged (hash partitions) never turns dense.
  hvds_sstream_t u;
  ASSERT_EQ(hvds__sstream_merge(&lay, &m, &c, 0, &u), HVDS_SUCCESS);
  EXPECT_FALSE(u.dense);
  EXPECT_EQ(u.n, 6u);
  for (auto* s : {&a, &b, &c, &m, &m2, &u}) hvds__sstream_free(s);
}

// merge(a, b) and merge(b, a) are bitwise identical, for every combination of sparse and dense.
TEST(SparseStream, MergeIsSymmetric) {
  std::mt19937 rng(5);
  for (hvds_dtype_t t : {HVDS_FLOAT32, HVDS_FLOAT16, HVDS_BFLOAT16, HVDS_FLOAT64}) {
    hvds_sparse_layout_t lay = {64, 2, t, HVDS_INT32};
    size_t vsz = hvds__dtype_bytes(t);
    for (int trial = 0; trial < 20; trial++) {
      hvds_sstream_t s[2];
      for (auto& x : s) {
        size_t n = rng() % 64;
        std::vector<int32_t> idx(n);
        std::vector<char> val(n * 2 * vsz);
        for (auto& i : idx) i = static_cast<int32_t>(rng() % 64);
        for (size_t i = 0; i < n * 2; i++) {
          float f = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 7.0f;
          if (t == HVDS_FLOAT32) memcpy(val.data() + i * 4, &f, 4);
          if (t == HVDS_FLOAT64) {
            double d = f / 3.0;
            memcpy(val.data() + i * 8, &d, 8);
          }
          uint16_t h = t == HVDS_FLOAT16 ? hvds__float_to_half(f) : hvds__float_to_bf16(f);
          if (vsz == 2) memcpy(val.data() + i * 2, &h, 2);
        }
        hvds_sparse_input_check_t chk;
        ASSERT_EQ(hvds__sstream_from_input(&lay, idx.data(), val.data(), n, &chk, &x),
                  HVDS_SUCCESS);
      }
      hvds_sstream_t ab, ba;
      ASSERT_EQ(hvds__sstream_merge(&lay, &s[0], &s[1], 1, &ab), HVDS_SUCCESS);
      ASSERT_EQ(hvds__sstream_merge(&lay, &s[1], &s[0], 1, &ba), HVDS_SUCCESS);
      EXPECT_EQ(ab.dense, ba.dense);
      EXPECT_EQ(raw(lay, ab), raw(lay, ba)) << "dtype " << t << " trial " << trial;
      for (auto* x : {&s[0], &s[1], &ab, &ba}) hvds__sstream_free(x);
    }
  }
}

TEST(SparseStream, MergeManyConsumesAndSums) {
  auto lay = coo(1000, HVDS_INT32, HVDS_INT64);
  std::vector<int32_t> want(1000, 0);
  for (int m : {0, 1, 2, 3, 5, 8}) {
    std::vector<hvds_sstream_t> s(m);
    std::fill(want.begin(), want.end(), 0);
    for (int j = 0; j < m; j++) {
      std::vector<int64_t> idx;
      std::vector<int32_t> val;
      for (int i = 0; i < 30; i++) {
        idx.push_back((j * 37 + i * 11) % 1000);
        val.push_back(j + i);
        want[idx.back()] += j + i;
      }
      hvds_sparse_input_check_t chk;
      ASSERT_EQ(hvds__sstream_from_input(&lay, idx.data(), val.data(), idx.size(), &chk, &s[j]),
                HVDS_SUCCESS);
    }
    hvds_sstream_t out;
    ASSERT_EQ(hvds__sstream_merge_many(&lay, s.data(), m, 1, &out), HVDS_SUCCESS);
    for (auto& x : s) EXPECT_EQ(x.base, nullptr);
    std::vector<int32_t> got(1000, -1);
    if (m > 0) hvds__sstream_to_dense(&lay, &out, got.data());
    if (m > 0) {
      EXPECT_EQ(got, want) << "m = " << m;
    } else {
      EXPECT_EQ(out.n, 0u);
    }
    hvds__sstream_free(&out);
  }
}

// Parts follow floor(j len / m); each is dense by the rule on its own range; offsets aligned.
TEST(SparseStream, SplitIntoPartitions) {
  auto lay = coo(20);
  // Range [0,5): 1 entry (sparse); [5,10): 3 entries (dense, >= 2.5); [10,15): none; [15,20): 1.
  hvds_sstream_t s = make(lay, {2, 5, 6, 9, 17}, {1, 2, 3, 4, 5});
  char* buf = nullptr;
  size_t off[4], bytes[4];
  uint64_t count[4];
  ASSERT_EQ(hvds__sstream_split(&lay, &s, 4, &buf, off, bytes, count), HVDS_SUCCESS);
  EXPECT_EQ(count[0], 1u);
  EXPECT_EQ(count[1], 5u);  // dense: all 5 rows of [5, 10)
  EXPECT_EQ(count[2], 0u);
  EXPECT_EQ(count[3], 1u);
  std::vector<float> total(20, 0);
  for (int j = 0; j < 4; j++) {
    EXPECT_EQ(off[j] % 8, 0u);
    size_t lo = hvds__sparse_part_lo(0, 20, 4, j), len = hvds__sparse_part_lo(0, 20, 4, j + 1) - lo;
    hvds_sstream_t part;
    hvds__sstream_view(&lay, buf + off[j], lo, len, count[j], count[j] == len, &part);
    EXPECT_EQ(bytes[j], hvds__sstream_bytes(&lay, part.n, part.dense));
    std::vector<float> d = densify(lay, part);
    for (int i = 0; i < 20; i++) total[i] += d[i];
  }
  EXPECT_EQ(total, densify(lay, s));
  free(buf);
  hvds__sstream_free(&s);
}

TEST(SparseStream, AddIntoDenseAccumulator) {
  auto lay = coo(8);
  hvds_sstream_t a = make(lay, {4, 6}, {1, 2});
  std::vector<float> acc(8, 1);
  a.lo = 0;
  hvds__sstream_add_into(&lay, reinterpret_cast<char*>(acc.data()), &a);
  EXPECT_EQ(acc, (std::vector<float>{1, 1, 1, 1, 2, 1, 3, 1}));
  hvds__sstream_free(&a);
}

TEST(SparseStream, RadixSortIsStable) {
  std::mt19937_64 rng(9);
  for (uint64_t max_key :
       {uint64_t{0}, uint64_t{1}, uint64_t{255}, uint64_t{70000}, ~uint64_t{0}}) {
    std::vector<uint64_t> k(5000), v(5000);
    for (size_t i = 0; i < k.size(); i++) {
      k[i] = max_key == ~uint64_t{0} ? rng() : rng() % (max_key + 1);
      v[i] = i;
    }
    auto want_k = k;
    std::vector<size_t> order(k.size());
    for (size_t i = 0; i < order.size(); i++) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return k[x] < k[y]; });
    ASSERT_EQ(hvds__sparse_sort_pairs(k.data(), v.data(), k.size(), max_key), HVDS_SUCCESS);
    for (size_t i = 0; i < k.size(); i++) {
      ASSERT_EQ(v[i], order[i]) << "max_key " << max_key;
      ASSERT_EQ(k[i], want_k[order[i]]);
    }
  }
}

// Distinct keys: the bitmap ranking (a dense key range) and the radix fallback (a sparse one)
// both give every key its place in sorted order; the step counts follow the method chosen.
TEST(SparseStream, UniqueRanksRankDenseRangesAndFallBackOnSparseOnes) {
  std::mt19937_64 rng(11);
  for (uint64_t max_key : {uint64_t{63}, uint64_t{5000}, uint64_t{1} << 20, uint64_t{1} << 40}) {
    size_t n = std::min<uint64_t>(4000, max_key + 1);
    std::vector<uint64_t> all(max_key < 100000 ? max_key + 1 : 0);
    std::vector<uint64_t> k;
    if (!all.empty()) {
      for (uint64_t i = 0; i <= max_key; i++) all[i] = i;
      std::shuffle(all.begin(), all.end(), rng);
      k.assign(all.begin(), all.begin() + n);
    } else {
      std::set<uint64_t> seen;
      while (seen.size() < n) seen.insert(rng() % (max_key + 1));
      k.assign(seen.begin(), seen.end());
      std::shuffle(k.begin(), k.end(), rng);
    }
    std::vector<uint64_t> rank(n, ~uint64_t{0});
    std::vector<uint64_t> given = k, sorted = k;
    std::sort(sorted.begin(), sorted.end());
    ASSERT_EQ(hvds__sparse_rank_unique(k.data(), n, max_key, rank.data()), HVDS_SUCCESS);
    EXPECT_EQ(k, sorted) << "max_key " << max_key;
    for (size_t i = 0; i < n; i++) {
      ASSERT_LT(rank[i], n) << "max_key " << max_key;
      ASSERT_EQ(sorted[rank[i]], given[i]) << "max_key " << max_key << " key " << given[i];
    }
  }
  // 2^18 keys over 2^24: ranking (3 x 2^18 + 2^19 steps) beats three radix passes (6 x 2^18).
  EXPECT_LT(hvds__sparse_sort_steps(1 << 18, (1 << 24) - 1, 1),
            hvds__sparse_sort_steps(1 << 18, (1 << 24) - 1, 0));
  // 100 keys over 2^40: the radix sort.
  EXPECT_DOUBLE_EQ(hvds__sparse_sort_steps(100, 1099511627775.0, 1),
                   hvds__sparse_sort_steps(100, 1099511627775.0, 0));
}

// Rows given in any order, in segments, come out sorted by their distinct keys, each row with
// its own key: ranges of one bucket and of many (2^15 keys a bucket), rows of one and of three
// values, 32- and 64-bit indices, empty segments among them.
TEST(SparseStream, SortRowsUniquePutsEveryRowAtItsKeysRank) {
  std::mt19937_64 rng(29);
  for (uint64_t max_key : {uint64_t{1000}, uint64_t{1} << 20, (uint64_t{1} << 33) + 5}) {
    for (size_t row : {size_t{1}, size_t{3}}) {
      hvds_sparse_layout_t lay = {max_key + 1, row, HVDS_FLOAT32,
                                  max_key > INT32_MAX ? HVDS_INT64 : HVDS_INT32};
      size_t n = max_key < 5000 ? 400 : 5000;
      std::set<uint64_t> seen;
      while (seen.size() < n)
        seen.insert(max_key < (uint64_t{1} << 30) ? rng() % (max_key + 1)
                                                  : rng() % (1u << 22) << 11);
      std::vector<uint64_t> key(seen.begin(), seen.end());
      std::shuffle(key.begin(), key.end(), rng);
      std::vector<float> val(n * row);  // row i's values derive from its key
      for (size_t i = 0; i < n; i++)
        for (size_t d = 0; d < row; d++) val[i * row + d] = (float)(key[i] % 100003) + 0.25f * d;
      size_t cut1 = n / 3, cut2 = n / 3;  // segments of n / 3, 0 and the rest
      std::vector<const char*> seg = {(const char*)val.data(),
                                      (const char*)(val.data() + cut1 * row),
                                      (const char*)(val.data() + cut2 * row)};
      std::vector<size_t> count = {cut1, 0, n - cut2};
      size_t ib = hvds__sparse_idx_bytes(&lay);
      std::vector<char> idx(n * ib);
      std::vector<float> out(n * row, -1.0f);
      ASSERT_EQ(hvds__sparse_sort_rows_unique(&lay, key.data(), n, max_key, seg.data(),
                                              count.data(), 3, idx.data(), (char*)out.data()),
                HVDS_SUCCESS);
      std::vector<uint64_t> sorted = key;
      std::sort(sorted.begin(), sorted.end());
      for (size_t t = 0; t < n; t++) {
        ASSERT_EQ((uint64_t)hvds__sparse_idx_get(&lay, idx.data(), t), sorted[t]) << max_key;
        for (size_t d = 0; d < row; d++)
          ASSERT_EQ(out[t * row + d], (float)(sorted[t] % 100003) + 0.25f * d) << max_key;
      }
    }
  }
}

// Entries spread over m equal index ranges: m x the largest range's share, 1 when even (and for
// empty or dense streams), m when all fall into one range.
TEST(SparseStream, RangeImbalance) {
  auto lay = coo(1000);
  hvds_sstream_t even = make(lay, {10, 260, 510, 760}, {1, 1, 1, 1});
  EXPECT_DOUBLE_EQ(hvds__sstream_range_imbalance(&lay, &even, 4), 1.0);
  hvds_sstream_t head = make(lay, {0, 1, 2, 3, 4, 5, 999, 249}, {1, 1, 1, 1, 1, 1, 1, 1});
  // ranges [0,250) [250,500) [500,750) [750,1000): 7, 0, 0, 1 of 8
  EXPECT_DOUBLE_EQ(hvds__sstream_range_imbalance(&lay, &head, 4), 4.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(hvds__sstream_range_imbalance(&lay, &head, 1), 1.0);
  hvds_sstream_t one = make(lay, {250, 251, 499}, {1, 1, 1});
  EXPECT_DOUBLE_EQ(hvds__sstream_range_imbalance(&lay, &one, 4), 4.0);
  hvds_sstream_t none = make(lay, {}, {});
  EXPECT_DOUBLE_EQ(hvds__sstream_range_imbalance(&lay, &none, 4), 1.0);
  auto small = coo(4);
  hvds_sstream_t dense = make(small, {0, 1, 2, 3}, {1, 1, 1, 1});
  ASSERT_TRUE(dense.dense);
  EXPECT_DOUBLE_EQ(hvds__sstream_range_imbalance(&small, &dense, 4), 1.0);
  for (hvds_sstream_t* s : {&even, &head, &one, &none, &dense}) hvds__sstream_free(s);
}

// The typed COO merges (one value per index: float32 or float64 values, int32 or int64 indices)
// against a reference sum, symmetric bit for bit, with empty operands, -0.0 copied (not added to
// zero) between sparse operands, and the dense switch on the union when ranged.
TEST(SparseStream, TypedCooMergesMatchReference) {
  std::mt19937 rng(17);
  for (hvds_dtype_t it : {HVDS_INT32, HVDS_INT64}) {
    for (hvds_dtype_t t : {HVDS_FLOAT32, HVDS_FLOAT64}) {
      for (int trial = 0; trial < 40; trial++) {
        const size_t dim = 300;
        hvds_sparse_layout_t lay = {dim, 1, t, it};
        size_t vsz = hvds__dtype_bytes(t), isz = hvds__sparse_idx_bytes(&lay);
        std::vector<double> want(dim, 0.0);
        std::vector<int> present(dim, 0), neg_in(dim, 0);
        hvds_sstream_t s[2];
        for (int k = 0; k < 2; k++) {
          size_t n = trial % 7 == k ? 0 : rng() % (trial % 2 ? 150 : 40);
          std::set<int64_t> chosen;
          while (chosen.size() < n) chosen.insert(rng() % dim);
          std::vector<char> idx(n * isz + 1), val(n * vsz + 1);
          size_t i = 0;
          for (int64_t x : chosen) {
            double v = rng() % 5 == 0 ? -0.0 : static_cast<int>(rng() % 2001) - 1000;
            hvds__sparse_idx_set(&lay, idx.data(), i, x);
            if (t == HVDS_FLOAT32) {
              float f = static_cast<float>(v);
              memcpy(val.data() + i * 4, &f, 4);
            } else {
              memcpy(val.data() + i * 8, &v, 8);
            }
            want[x] += v;
            present[x]++;
            neg_in[x] = v == 0.0 && std::signbit(v);
            i++;
          }
          hvds_sparse_input_check_t chk;
          ASSERT_EQ(hvds__sstream_from_input(&lay, idx.data(), val.data(), n, &chk, &s[k]),
                    HVDS_SUCCESS);
        }
        size_t u = 0;
        for (int p : present) u += p > 0;
        for (int ranged : {0, 1}) {
          hvds_sstream_t ab, ba;
          ASSERT_EQ(hvds__sstream_merge(&lay, &s[0], &s[1], ranged, &ab), HVDS_SUCCESS);
          ASSERT_EQ(hvds__sstream_merge(&lay, &s[1], &s[0], ranged, &ba), HVDS_SUCCESS);
          EXPECT_EQ(raw(lay, ab), raw(lay, ba)) << "trial " << trial;
          bool dense_in = s[0].dense || s[1].dense;  // a dense operand makes a dense sum
          EXPECT_EQ(ab.dense, dense_in || (ranged && hvds__sparse_dense_rule(&lay, u, dim)))
              << trial;
          if (!ab.dense) {
            ASSERT_EQ(ab.n, u) << "trial " << trial;
          }
          std::vector<double> got(dim, 0.0);
          std::vector<int> neg_zero(dim, 0);
          const char* v = hvds__sstream_val(&lay, &ab);
          for (size_t e = 0; e < ab.n; e++) {
            size_t x = static_cast<size_t>(hvds__sstream_index(&lay, &ab, e));
            double d;
            if (t == HVDS_FLOAT32) {
              float f;
              memcpy(&f, v + e * 4, 4);
              d = f;
            } else {
              memcpy(&d, v + e * 8, 8);
            }
            got[x] = d;
            neg_zero[x] = d == 0.0 && std::signbit(d);
            if (!ab.dense) {
              ASSERT_GT(present[x], 0);
            }
            if (e > 0 && !ab.dense) {
              ASSERT_LT(hvds__sstream_index(&lay, &ab, e - 1), static_cast<int64_t>(x));
            }
          }
          for (size_t x = 0; x < dim; x++) {
            EXPECT_EQ(got[x], want[x]) << "index " << x << " trial " << trial;
            // A -0.0 held by one operand only is copied, so it stays -0.0.
            if (present[x] == 1 && neg_in[x] && !s[0].dense && !s[1].dense) {
              EXPECT_TRUE(neg_zero[x]) << "index " << x << " trial " << trial;
            }
          }
          hvds__sstream_free(&ab);
          hvds__sstream_free(&ba);
        }
        hvds__sstream_free(&s[0]);
        hvds__sstream_free(&s[1]);
      }
    }
  }
}

// Unsorted input through the packed sort (indices and positions in 32 bits; one to three 12-bit
// passes) and through the pair sort (an index range past 2^32): sorted, summed in input order
// (1e8 + 1 - 1e8 is 0 in float32 that way, 1 another way), against a reference.
TEST(SparseStream, UnsortedInputAtEveryKeyWidth) {
  std::mt19937_64 rng(23);
  for (uint64_t dim : {uint64_t{5}, uint64_t{4096}, uint64_t{1} << 24, uint64_t{1} << 40}) {
    auto lay = coo(dim, HVDS_FLOAT32, dim > (uint64_t{1} << 31) ? HVDS_INT64 : HVDS_INT32);
    std::vector<int64_t> idx;
    std::vector<float> val;
    int64_t hot = static_cast<int64_t>(dim - 1);
    for (float v : {1e8f, 1.0f, -1e8f}) {  // the same index three times, first
      idx.push_back(hot);
      val.push_back(v);
    }
    std::map<int64_t, float> want;
    want[hot] = (1e8f + 1.0f) + -1e8f;
    for (int i = 0; i < 3000; i++) {
      int64_t x = static_cast<int64_t>(rng() % (dim - 1));
      float v = static_cast<float>(static_cast<int>(rng() % 201) - 100);
      idx.push_back(x);
      val.push_back(v);
      want[x] += v;
    }
    hvds_sstream_t s = make(lay, idx, val);
    if (s.dense) {
      std::vector<float> d = densify(lay, s);
      for (auto& [x, v] : want) EXPECT_EQ(d[x], v) << "dim " << dim << " index " << x;
    } else {
      ASSERT_EQ(s.n, want.size()) << "dim " << dim;
      const float* v = reinterpret_cast<const float*>(hvds__sstream_val(&lay, &s));
      size_t e = 0;
      for (auto& [x, w] : want) {
        EXPECT_EQ(hvds__sstream_index(&lay, &s, e), x) << "dim " << dim;
        EXPECT_EQ(v[e], w) << "dim " << dim << " index " << x;
        e++;
      }
    }
    hvds__sstream_free(&s);
  }
  EXPECT_EQ((1e8f + 1.0f) + -1e8f, 0.0f);  // the input order's sum differs from the exact one
}
