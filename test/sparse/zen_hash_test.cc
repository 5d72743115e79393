// ZEN's keyed permutation: a bijection of [0, dim) with a working inverse, owners consistent
// with the range starts, different keys giving different permutations, and balanced owners for
// skewed index sets.
#include "zen_hash.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "sparse_stream.h"

TEST(ZenHash, IsAPermutationWithInverse) {
  for (uint64_t dim : {1u, 2u, 3u, 5u, 16u, 17u, 1000u, 65539u}) {
    hvds_zen_hash_t h;
    hvds__zen_hash_init(&h, dim, 12345);
    std::vector<char> seen(dim, 0);
    for (uint64_t x = 0; x < dim; x++) {
      uint64_t y = hvds__zen_hash(&h, x);
      ASSERT_LT(y, dim);
      ASSERT_FALSE(seen[y]) << "dim " << dim << " collision at " << x;
      seen[y] = 1;
      ASSERT_EQ(hvds__zen_hash_inv(&h, y), x);
    }
  }
}

TEST(ZenHash, LargeDomainsRoundTrip) {
  std::mt19937_64 rng(7);
  for (uint64_t dim : {uint64_t{1} << 31, (uint64_t{1} << 31) + 1, (uint64_t{1} << 40) + 3,
                       uint64_t{1} << 62, (uint64_t{1} << 63) - 25, uint64_t{1} << 63}) {
    hvds_zen_hash_t h;
    hvds__zen_hash_init(&h, dim, rng());
    for (int k = 0; k < 20000; k++) {
      uint64_t x = k < 4 ? (k < 2 ? (uint64_t)k : dim - 1 - (uint64_t)(k - 2)) : rng() % dim;
      uint64_t y = hvds__zen_hash(&h, x);
      ASSERT_LT(y, dim);
      ASSERT_EQ(hvds__zen_hash_inv(&h, y), x) << dim << " " << x;
    }
  }
}

TEST(ZenHash, KeyChangesThePermutation) {
  hvds_zen_hash_t a, b;
  hvds__zen_hash_init(&a, 1 << 16, 1);
  hvds__zen_hash_init(&b, 1 << 16, 2);
  int same = 0;
  for (uint64_t x = 0; x < 1000; x++) same += hvds__zen_hash(&a, x) == hvds__zen_hash(&b, x);
  EXPECT_LT(same, 5);
}

TEST(ZenHash, OwnerMatchesRangeStarts) {
  for (uint64_t dim : {1u, 7u, 8u, 100u, 1001u}) {
    for (int P : {1, 2, 3, 7, 8}) {
      for (uint64_t y = 0; y < dim; y++) {
        int j = hvds__zen_owner(dim, P, y);
        ASSERT_GE(j, 0);
        ASSERT_LT(j, P);
        ASSERT_LE(hvds__sparse_part_lo(0, dim, P, j), y);
        ASSERT_LT(y, hvds__sparse_part_lo(0, dim, P, j + 1)) << dim << " " << P << " " << y;
      }
    }
  }
}

// Large domains and rank counts, where (y + 1) P overflows 64 bits: the owner's range holds y,
// by 128-bit arithmetic.
TEST(ZenHash, OwnerHoldsYOnLargeDomains) {
  std::mt19937_64 rng(11);
  for (uint64_t dim : {uint64_t{1} << 40, uint64_t{1} << 63, ~uint64_t{0}}) {
    for (int P : {1, 3, 8, 1000, 65535}) {
      for (int k = 0; k < 2000; k++) {
        uint64_t y = k == 0 ? 0 : k == 1 ? dim - 1 : rng() % dim;
        int j = hvds__zen_owner(dim, P, y);
        ASSERT_GE(j, 0);
        ASSERT_LT(j, P);
        unsigned __int128 lo = (unsigned __int128)dim * (unsigned)j / (unsigned)P;
        unsigned __int128 hi = (unsigned __int128)dim * (unsigned)(j + 1) / (unsigned)P;
        ASSERT_TRUE(lo <= y && y < hi) << "dim " << dim << " P " << P << " y " << y;
      }
    }
  }
}

// A contiguous block of hot indices (the skew of embedding gradients) spreads evenly.
TEST(ZenHash, BalancesContiguousAndStridedIndices) {
  const uint64_t dim = 1 << 26;
  const int P = 16;
  hvds_zen_hash_t h;
  hvds__zen_hash_init(&h, dim, 99);
  for (uint64_t stride : {1u, 16u, 1024u}) {
    std::vector<int> count(P, 0);
    const int n = 40000;
    for (int i = 0; i < n; i++) count[hvds__zen_owner(dim, P, hvds__zen_hash(&h, i * stride))]++;
    int most = 0;
    for (int c : count) most = std::max(most, c);
    EXPECT_LT(static_cast<double>(most) * P / n, 1.1) << "stride " << stride;
  }
}
