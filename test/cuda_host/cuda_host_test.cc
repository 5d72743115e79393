// The element logic the CUDA kernels run, compiled for the host and compared with the CPU
// reference of ops/: reduce, scale and the non-zero test (ops/reduce.c), the bitmap's word
// layout and rank arithmetic (ops/sparse/zen.c's format), and the warp-tiled stable counting
// sort of cuda/zen.cu emulated step by step. ZEN's hash and the 16-bit conversions are one
// definition for both sides (ops/sparse/zen_hash_shared.h, ops/half_shared.h), tested in
// test/sparse/ and test/ops/. No GPU needed; test/gpu/ runs the kernels themselves.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "../common/random_elems.h"
#include "elem_ops.h"
#include "reduce.h"
#include "zen_hash.h"
#include "zen_hash_shared.h"

namespace {

// ---- Reduce, scale, non-zero ----

using hvds_test::random_elems;

// Bitwise equal, except that any NaN equals any NaN: which NaN payload survives an arithmetic
// operation depends on the compiler's operand order (and GPUs return a canonical NaN).
::testing::AssertionResult same_elems(hvds_dtype_t t, const std::vector<uint8_t>& got,
                                      const std::vector<uint8_t>& want) {
  size_t esz = hvds__dtype_bytes(t), n = got.size() / esz;
  for (size_t i = 0; i < n; i++) {
    if (memcmp(&got[i * esz], &want[i * esz], esz) == 0) continue;
    double g = 0, w = 0;
    if (t == HVDS_FLOAT16 || t == HVDS_BFLOAT16) {
      uint16_t a, b;
      memcpy(&a, &got[i * esz], 2);
      memcpy(&b, &want[i * esz], 2);
      g = t == HVDS_FLOAT16 ? hvds__half_to_float(a) : hvds__bf16_to_float(a);
      w = t == HVDS_FLOAT16 ? hvds__half_to_float(b) : hvds__bf16_to_float(b);
    } else if (t == HVDS_FLOAT32) {
      float a, b;
      memcpy(&a, &got[i * esz], 4);
      memcpy(&b, &want[i * esz], 4);
      g = a, w = b;
    } else if (t == HVDS_FLOAT64) {
      memcpy(&g, &got[i * esz], 8);
      memcpy(&w, &want[i * esz], 8);
    }
    if (std::isnan(g) && std::isnan(w)) continue;
    return ::testing::AssertionFailure() << "element " << i << " differs";
  }
  return ::testing::AssertionSuccess();
}

template <int OP, class T>
void combine_all(void* dst, const void* src, size_t n) {
  T* d = static_cast<T*>(dst);
  const T* s = static_cast<const T*>(src);
  for (size_t i = 0; i < n; i++) d[i] = hvds_elem::combine<OP>(d[i], s[i]);
}

template <class T>
void combine_op(int slot, void* dst, const void* src, size_t n) {
  switch (slot) {
    case hvds_elem::kSum:
      return combine_all<hvds_elem::kSum, T>(dst, src, n);
    case hvds_elem::kMin:
      return combine_all<hvds_elem::kMin, T>(dst, src, n);
    case hvds_elem::kMax:
      return combine_all<hvds_elem::kMax, T>(dst, src, n);
    case hvds_elem::kProd:
      return combine_all<hvds_elem::kProd, T>(dst, src, n);
    default:
      if constexpr (std::is_integral<T>::value || std::is_same<T, hvds_elem::boolean>::value) {
        if (slot == hvds_elem::kBand) return combine_all<hvds_elem::kBand, T>(dst, src, n);
        return combine_all<hvds_elem::kBor, T>(dst, src, n);
      }
  }
}

// Calls f(T{}) for dtype t (the dispatch the kernels use).
template <class F>
void with_type(hvds_dtype_t t, F&& f) {
  hvds_elem::with_dtype(t, f, [t] { FAIL() << "dtype " << t; });
}

struct OpCase {
  hvds_reduce_op_t op;
  int slot;
};

TEST(CudaHostElem, CombineEqualsHvdsReduce) {
  const OpCase ops[] = {{HVDS_SUM, hvds_elem::kSum},       {HVDS_AVERAGE, hvds_elem::kSum},
                        {HVDS_MIN, hvds_elem::kMin},       {HVDS_MAX, hvds_elem::kMax},
                        {HVDS_PRODUCT, hvds_elem::kProd},  {HVDS_REDUCE_BAND, hvds_elem::kBand},
                        {HVDS_REDUCE_BOR, hvds_elem::kBor}};
  std::mt19937 rng(5);
  const size_t n = 4099;
  for (int ti = 0; ti < HVDS_DTYPE_COUNT; ti++) {
    hvds_dtype_t t = (hvds_dtype_t)ti;
    for (const OpCase& oc : ops) {
      std::vector<uint8_t> a = random_elems(t, n, rng), b = random_elems(t, n, rng), want = a;
      if (hvds__reduce(want.data(), b.data(), n, t, oc.op) != HVDS_SUCCESS) continue;
      std::vector<uint8_t> got = a;
      with_type(t, [&](auto tag) { combine_op<decltype(tag)>(oc.slot, got.data(), b.data(), n); });
      ASSERT_TRUE(same_elems(t, got, want)) << "dtype " << ti << " op " << (int)oc.op;
    }
  }
}

TEST(CudaHostElem, ScaleEqualsHvdsScale) {
  std::mt19937 rng(6);
  const size_t n = 4099;
  for (int ti = 0; ti < HVDS_DTYPE_COUNT; ti++) {
    hvds_dtype_t t = (hvds_dtype_t)ti;
    for (double f :
         {0.5, -1.5, 1.0 / 3.0, 0.125, 3.0, 1e10, -1e300, 0.0, (double)INFINITY, (double)NAN}) {
      std::vector<uint8_t> want = random_elems(t, n, rng), got = want;
      ASSERT_EQ(hvds__scale(want.data(), n, t, f), HVDS_SUCCESS);
      with_type(t, [&](auto tag) {
        using T = decltype(tag);
        T* g = reinterpret_cast<T*>(got.data());
        for (size_t i = 0; i < n; i++) g[i] = hvds_elem::scale(g[i], f);
      });
      ASSERT_TRUE(same_elems(t, got, want)) << "dtype " << ti << " factor " << f;
    }
  }
}

TEST(CudaHostElem, NonzeroMeansNotEqualToZero) {
  std::mt19937 rng(8);
  const size_t n = 20000;
  for (int ti = 0; ti < HVDS_DTYPE_COUNT; ti++) {
    hvds_dtype_t t = (hvds_dtype_t)ti;
    std::vector<uint8_t> v = random_elems(t, n, rng);
    with_type(t, [&](auto tag) {
      using T = decltype(tag);
      const T* e = reinterpret_cast<const T*>(v.data());
      for (size_t i = 0; i < n; i++) {
        double d;  // the value as a number: NaN != 0, -0 == 0
        if constexpr (std::is_same<T, hvds_elem::f16>::value)
          d = hvds__half_to_float(e[i].bits);
        else if constexpr (std::is_same<T, hvds_elem::bf16>::value)
          d = hvds__bf16_to_float(e[i].bits);
        else if constexpr (std::is_same<T, hvds_elem::boolean>::value)
          d = e[i].v;
        else
          d = (double)e[i];
        ASSERT_EQ(hvds_elem::nonzero(e[i]), d != 0) << "dtype " << ti << " element " << i;
      }
    });
  }
}

// ---- ZEN's bitmap: word layout and the rank arithmetic of cuda/zen.cu ----

TEST(CudaHostBitmap, WordsAreZenBytesAndRanksGiveHashedOrder) {
  uint32_t probe = 1;
  uint8_t first;
  memcpy(&first, &probe, 1);
  ASSERT_EQ(first, 1) << "the word-wise bitmap needs a little-endian host, as the GPUs are";
  const uint64_t dim = 100003, lo = 33333, len = 40000;
  hvds_zen_hash_t h;
  hvds__zen_hash_init(&h, dim, 99);
  std::mt19937_64 rng(2);
  // The partition of the owner of [lo, lo + len): indices hashing into it, each once.
  std::vector<uint64_t> idx;
  for (uint64_t x = 0; x < dim; x++) {
    uint64_t y = hvds__zen_hash(&h, x);
    if (y >= lo && y < lo + len && rng() % 5 == 0) idx.push_back(x);
  }
  // zen.c's encoding: bytes with bit (y - lo) LSB first; rows sorted by hashed position.
  size_t bytes = ((len + 7) / 8 + 7) & ~size_t{7};
  std::vector<uint8_t> want_map(bytes, 0);
  std::vector<std::pair<uint64_t, size_t>> order;
  for (size_t i = 0; i < idx.size(); i++) {
    uint64_t key = hvds__zen_hash(&h, idx[i]) - lo;
    want_map[key >> 3] |= (uint8_t)(1u << (key & 7));
    order.push_back({key, i});
  }
  std::sort(order.begin(), order.end());
  // cuda/zen.cu's: atomicOr into 32-bit words, then position = words' prefix popcount + the
  // popcount of the word's lower bits.
  std::vector<uint32_t> words(bytes / 4, 0);
  for (uint64_t x : idx) {
    uint64_t key = hvds_hd_zen_hash(&h, x) - lo;
    words[key >> 5] |= 1u << (key & 31);
  }
  ASSERT_EQ(memcmp(words.data(), want_map.data(), bytes), 0);
  std::vector<uint64_t> prefix(words.size() + 1, 0);
  for (size_t w = 0; w < words.size(); w++)
    prefix[w + 1] = prefix[w] + (uint64_t)__builtin_popcount(words[w]);
  for (size_t t = 0; t < order.size(); t++) {
    uint64_t key = order[t].first;
    uint64_t pos =
        prefix[key >> 5] + (uint64_t)__builtin_popcount(words[key >> 5] & ((1u << (key & 31)) - 1));
    ASSERT_EQ(pos, t);
  }
  // Decode: walking each word's set bits in order gives the indices in hashed order.
  size_t t = 0;
  for (size_t w = 0; w < words.size(); w++)
    for (uint32_t b = words[w]; b != 0; b &= b - 1, t++)
      ASSERT_EQ(hvds_hd_zen_hash_inv(&h, lo + w * 32 + (uint64_t)__builtin_ctz(b)),
                idx[order[t].second]);
  EXPECT_EQ(t, idx.size());
}

// ---- The partition's warp-tiled counting sort, emulated lane by lane ----

// cuda/zen.cu's two passes for one tile size: histogram per (owner, tile) with the group
// leader adding the group size, exclusive scan owner-major, then cursor + rank among lower
// lanes of the same owner.
std::vector<size_t> emulate_partition(const std::vector<int>& owner, int P, size_t steps) {
  size_t n = owner.size(), tile = steps * 32, ntiles = (n + tile - 1) / tile;
  std::vector<uint64_t> counts((size_t)P * ntiles, 0), offs(counts.size(), 0);
  for (size_t w = 0; w < ntiles; w++)
    for (size_t i = w * tile; i < std::min(n, (w + 1) * tile); i++) counts[owner[i] * ntiles + w]++;
  for (size_t k = 1; k < counts.size(); k++) offs[k] = offs[k - 1] + counts[k - 1];
  std::vector<size_t> pos(n);
  for (size_t w = 0; w < ntiles; w++) {
    for (size_t k = 0; k < steps; k++) {
      size_t base = (w * steps + k) * 32;
      std::vector<uint64_t> add((size_t)P, 0);
      for (size_t lane = 0; lane < 32 && base + lane < n; lane++) {
        int o = owner[base + lane];
        size_t rank = 0;
        for (size_t l = 0; l < lane; l++) rank += owner[base + l] == o;
        pos[base + lane] = offs[o * ntiles + w] + rank;
        add[o]++;
      }
      for (int o = 0; o < P; o++) offs[o * ntiles + w] += add[o];
    }
  }
  return pos;
}

TEST(CudaHostPartition, WarpTiledCountingSortIsStableByOwner) {
  std::mt19937_64 rng(4);
  for (int P : {1, 2, 3, 8, 33, 200}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{31}, size_t{1000}, size_t{20000}}) {
      const uint64_t dim = 1u << 20;
      hvds_zen_hash_t h;
      hvds__zen_hash_init(&h, dim, rng());
      std::vector<int> owner(n);
      for (size_t i = 0; i < n; i++)
        owner[i] = hvds_hd_zen_owner(dim, P, hvds_hd_zen_hash(&h, rng() % dim));
      std::vector<size_t> order(n);
      for (size_t i = 0; i < n; i++) order[i] = i;
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t a, size_t b) { return owner[a] < owner[b]; });
      size_t steps = std::max<size_t>(32, ((size_t)P + 3) / 4);  // zen.cu's tile_steps
      std::vector<size_t> pos = emulate_partition(owner, P, steps);
      for (size_t t = 0; t < n; t++) ASSERT_EQ(pos[order[t]], t) << "P " << P << " n " << n;
    }
  }
}

}  // namespace
