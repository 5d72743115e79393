// The GPU compression kernels' element logic on the CPU, against ops/: cuda/topk.cu's radix
// selection and tiled take emulated thread by thread with cuda/topk_shared.h, against
// hvds__topk_feedback() (no sample); cuda/quantize.cu's encoder and decoder emulated with
// cuda/quant_shared.h, against hvds__quant_encode() / hvds__quant_decode() byte for byte.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "half_shared.h"
#include "quant_shared.h"
#include "quantize.h"
#include "reduce.h"
#include "topk.h"
#include "topk_shared.h"

namespace {

// ---- Top-k ----

constexpr int kDigitBits = 11, kThreads = 256, kPerThread = (1 << kDigitBits) / kThreads;
constexpr size_t kTile = 8 * kThreads;
constexpr unsigned kTieUnit = 1u << 16;

uint64_t key_of(float v) { return hvds_hd_topk_key_f32(v); }
uint64_t key_of(double v) { return hvds_hd_topk_key_f64(v); }

template <class T>
struct TopkOut {
  std::vector<int64_t> idx;
  std::vector<T> vals;
  uint64_t count = 0;
};

// One descend_kernel launch: 256 threads of 8 buckets from the top, exclusive prefix of the
// threads' sums, the one crossing bucket fixes the digit.
void emulate_descend(const std::vector<uint64_t>& hist, int shift, int width, uint64_t k,
                     hvds_hd_topk_sel_t* sel) {
  int top = (1 << width) - 1;
  uint64_t need = k - sel->above, seen = 0;
  hvds_hd_topk_sel_t next = *sel;
  int crossings = 0;
  for (int t = 0; t < kThreads; t++) {
    for (int j = 0; j < kPerThread; j++) {
      int b = top - (t * kPerThread + j);
      if (b < 0) break;
      if (hvds_hd_topk_crosses(seen, hist[b], need, (uint32_t)b)) {
        next = *sel;
        hvds_hd_topk_descend(&next, (uint32_t)b, shift, width, seen);
        crossings++;
      }
      seen += hist[b];
    }
  }
  ASSERT_EQ(crossings, 1) << "shift " << shift;
  *sel = next;
}

// cuda/topk.cu's three steps on the host (k >= 1, n >= 1).
template <class T>
TopkOut<T> emulate_topk(std::vector<T>* acc, const std::vector<T>* grad, uint64_t k) {
  size_t n = acc->size();
  if (k > n) k = n;
  if (grad)
    for (size_t i = 0; i < n; i++) (*acc)[i] += (*grad)[i];
  hvds_hd_topk_sel_t sel = {0, 0, 0};
  for (int shift = sizeof(T) == 4 ? 31 : 63; shift > 0;) {
    int width = shift >= kDigitBits ? kDigitBits : shift;
    shift -= width;
    std::vector<uint64_t> hist(1 << kDigitBits, 0);
    for (T v : *acc) {
      uint64_t key = key_of(v);
      if (hvds_hd_topk_matches(&sel, key)) hist[(key >> shift) & ((1u << width) - 1)]++;
    }
    emulate_descend(hist, shift, width, k, &sel);
  }
  TopkOut<T> out;
  uint64_t kth = sel.prefix, ties = k - sel.above;
  out.count = kth != 0 ? k : sel.above;
  out.idx.assign(out.count, -1);
  out.vals.assign(out.count, T(0));
  // Step 2: per-tile counts, exclusive scans. Step 3: rounds with a block scan of the flags.
  size_t tiles = (n + kTile - 1) / kTile;
  std::vector<uint64_t> gt(tiles + 1, 0), tie(tiles + 1, 0);
  for (size_t i = 0; i < n; i++) {
    gt[i / kTile + 1] += hvds_hd_topk_above(key_of((*acc)[i]), kth);
    tie[i / kTile + 1] += hvds_hd_topk_tie(key_of((*acc)[i]), kth);
  }
  for (size_t t = 0; t < tiles; t++) gt[t + 1] += gt[t], tie[t + 1] += tie[t];
  for (size_t t = 0; t < tiles; t++) {
    uint64_t g = gt[t], e = tie[t];
    for (size_t r = 0; r < kTile / kThreads; r++) {
      unsigned before = 0;
      for (size_t th = 0; th < (size_t)kThreads; th++) {
        size_t i = t * kTile + r * kThreads + th;
        if (i >= n) break;
        uint64_t key = key_of((*acc)[i]);
        unsigned f = hvds_hd_topk_above(key, kth) ? 1u : hvds_hd_topk_tie(key, kth) ? kTieUnit : 0;
        int64_t slot =
            f ? hvds_hd_topk_slot(key, kth, ties, g + before % kTieUnit, e + before / kTieUnit)
              : -1;
        if (slot >= 0) {
          EXPECT_LT((uint64_t)slot, out.count);
          if ((uint64_t)slot >= out.count) return out;
          out.idx[slot] = (int64_t)i;
          out.vals[slot] = (*acc)[i];
          (*acc)[i] = T(0);
        }
        before += f;
      }
      g += before % kTieUnit;
      e += before / kTieUnit;
    }
  }
  return out;
}

template <class T>
void expect_topk_equals_ops(const std::vector<T>& acc0, const std::vector<T>* grad, uint64_t k,
                            const char* what) {
  SCOPED_TRACE(::testing::Message() << what << ": n " << acc0.size() << " k " << k);
  std::vector<T> want_acc = acc0, got_acc = acc0;
  std::vector<int64_t> want_idx(k + 1, -1);
  std::vector<T> want_vals(k + 1, T(0));
  int64_t count = -1;
  hvds_topk_plan_t plan = {(int64_t)k, 0, 0, 0};
  ASSERT_EQ(
      hvds__topk_feedback(want_acc.data(), grad ? grad->data() : nullptr,
                          sizeof(T) == 4 ? HVDS_FLOAT32 : HVDS_FLOAT64, (int64_t)acc0.size(), &plan,
                          want_idx.data(), HVDS_INT64, want_vals.data(), &count, nullptr),
      HVDS_SUCCESS);
  TopkOut<T> got = emulate_topk(&got_acc, grad, k);
  ASSERT_EQ(got.count, (uint64_t)count);
  for (int64_t j = 0; j < count; j++) {
    ASSERT_EQ(got.idx[j], want_idx[j]) << "entry " << j;
    ASSERT_EQ(memcmp(&got.vals[j], &want_vals[j], sizeof(T)), 0) << "entry " << j;
  }
  ASSERT_EQ(memcmp(got_acc.data(), want_acc.data(), acc0.size() * sizeof(T)), 0) << "residual";
}

// n values of one kind: "normal" (distinct magnitudes mostly), "ties" (a few magnitudes),
// "sparse" (mostly zeros), "special" (NaN, infinities, -0, subnormals among normals).
template <class T>
std::vector<T> topk_input(const char* kind, size_t n, std::mt19937_64& rng) {
  std::normal_distribution<double> normal;
  std::vector<T> v(n);
  for (size_t i = 0; i < n; i++) {
    T x = (T)normal(rng);
    if (!strcmp(kind, "ties")) x = (T)((double)(rng() % 4) * 0.5 * (rng() % 2 ? 1 : -1));
    if (!strcmp(kind, "sparse") && rng() % 16 != 0) x = T(0);
    if (!strcmp(kind, "special")) {
      switch (rng() % 12) {
        case 0:
          x = std::numeric_limits<T>::quiet_NaN();
          break;
        case 1:
          x = -std::numeric_limits<T>::infinity();
          break;
        case 2:
          x = -T(0);
          break;
        case 3:
          x = std::numeric_limits<T>::denorm_min() * (T)(rng() % 5);
          break;
      }
    }
    v[i] = x;
  }
  return v;
}

template <class T>
void topk_sweep(uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (const char* kind : {"normal", "ties", "sparse", "special"}) {
    for (size_t n : {size_t{1}, size_t{2}, size_t{255}, size_t{2048}, size_t{2049}, size_t{7001}}) {
      std::vector<T> acc = topk_input<T>(kind, n, rng), grad = topk_input<T>("normal", n, rng);
      for (uint64_t k : {uint64_t{1}, uint64_t{3}, uint64_t{257}, (uint64_t)n / 3 + 1,
                         (uint64_t)n - 1, (uint64_t)n, (uint64_t)n + 5}) {
        if (k == 0) continue;
        expect_topk_equals_ops<T>(acc, nullptr, k, kind);
        expect_topk_equals_ops<T>(acc, &grad, k, kind);
      }
    }
  }
}

TEST(CudaHostTopk, KeysOrderAsMagnitudesWithNaNOnTop) {
  const float f[] = {0.0f,  std::numeric_limits<float>::denorm_min(), 1e-30f, 0.5f, 1.0f,
                     3e38f, std::numeric_limits<float>::infinity()};
  for (size_t i = 0; i + 1 < sizeof f / sizeof f[0]; i++) {
    EXPECT_LT(hvds_hd_topk_key_f32(f[i]), hvds_hd_topk_key_f32(f[i + 1]));
    EXPECT_LT(hvds_hd_topk_key_f64(f[i]), hvds_hd_topk_key_f64(f[i + 1]));
    EXPECT_EQ(hvds_hd_topk_key_f32(-f[i]), hvds_hd_topk_key_f32(f[i]));
  }
  EXPECT_GT(hvds_hd_topk_key_f32(std::nanf("")), hvds_hd_topk_key_f32(-INFINITY));
  EXPECT_GT(hvds_hd_topk_key_f64(-std::nan("")), hvds_hd_topk_key_f64(INFINITY));
  EXPECT_EQ(hvds_hd_topk_key_f64(-0.0), 0u);
}

TEST(CudaHostTopk, EmulatedGpuSelectionEqualsOpsFloat32) { topk_sweep<float>(1); }

TEST(CudaHostTopk, EmulatedGpuSelectionEqualsOpsFloat64) { topk_sweep<double>(2); }

TEST(CudaHostTopk, ManyTiesAcrossTilesGoToTheLowestIndices) {
  // Every entry ties except a few large ones: the ties taken span several tiles and rounds.
  for (size_t n : {size_t{5000}, size_t{20000}}) {
    std::vector<float> acc(n, 1.0f);
    for (size_t i = 0; i < n; i += 997) acc[i] = -4.0f;
    for (uint64_t k : {uint64_t{30}, uint64_t{2500}, uint64_t{4097}})
      expect_topk_equals_ops<float>(acc, nullptr, k, "ties");
  }
}

// ---- Quantization ----

constexpr size_t kBucket = HVDS_QUANT_BUCKET, kQThreads = kBucket / 4;

// The dtype's values as doubles (the kernel's load()).
std::vector<double> load_all(hvds_dtype_t t, const std::vector<uint8_t>& src, size_t n) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; i++) {
    uint16_t h;
    float f;
    switch (t) {
      case HVDS_FLOAT16:
      case HVDS_BFLOAT16:
        memcpy(&h, &src[2 * i], 2);
        v[i] = t == HVDS_FLOAT16 ? hvds_hd_half_to_float(h) : hvds_hd_bf16_to_float(h);
        break;
      case HVDS_FLOAT32:
        memcpy(&f, &src[4 * i], 4);
        v[i] = f;
        break;
      default:
        memcpy(&v[i], &src[8 * i], 8);
    }
  }
  return v;
}

// cuda/quantize.cu's encode_kernel, thread by thread: thread maxima combined as a tree (not the
// CPU's order), the scale's bytes, each thread's code bytes up to the last code byte, padding.
std::vector<uint8_t> emulate_encode(const std::vector<double>& v, int bits, uint64_t seed) {
  size_t n = v.size(), nb = (n + kBucket - 1) / kBucket, total = hvds__quant_bytes(n, bits);
  size_t end = nb * 4 + (n * bits + 7) / 8;
  int s = hvds__quant_levels(bits);
  std::vector<uint8_t> dst(total, 0xab);  // every byte must be written
  for (size_t b = 0; b < nb; b++) {
    std::vector<double> mx(kQThreads, 0);
    for (size_t th = 0; th < kQThreads; th++)
      for (size_t j = 0; j < 4; j++) {
        size_t i = b * kBucket + 4 * th + j;
        mx[th] = hvds_hd_quant_absmax(mx[th], i < n ? v[i] : 0.0);
      }
    for (size_t half = kQThreads / 2; half > 0; half /= 2)
      for (size_t th = 0; th < half; th++) mx[th] = hvds_hd_quant_absmax(mx[th], mx[th + half]);
    float scale = hvds_hd_quant_scale(mx[0]);
    uint32_t sb = hvds_hd_f32_bits(scale);
    for (int k = 0; k < 4; k++) dst[b * 4 + k] = (uint8_t)(sb >> (8 * k));
    double inv = hvds_hd_quant_inv(scale, s);
    for (size_t th = 0; th < kQThreads; th++) {
      size_t first = b * kBucket + 4 * th;
      uint32_t c[4];
      for (size_t j = 0; j < 4; j++)
        c[j] = first + j < n ? hvds_hd_quant_code(v[first + j], scale, s, inv, seed, first + j) : 0;
      uint32_t group = hvds_hd_quant_pack4(c, bits);
      size_t at = nb * 4 + first * bits / 8;
      for (int k = 0; k < bits / 2 && at + k < end; k++) dst[at + k] = (uint8_t)(group >> (8 * k));
    }
  }
  for (size_t p = end; p < total; p++) dst[p] = 0;
  return dst;
}

// x stored at e as dtype t; 16-bit types through the given float converters (the device's or
// the CPU's, whichever the caller emulates).
template <typename ToHalf, typename ToBf16>
void store_as(hvds_dtype_t t, double x, uint8_t* e, ToHalf to_half, ToBf16 to_bf16) {
  float f = (float)x;
  uint16_t h;
  switch (t) {
    case HVDS_FLOAT16:
    case HVDS_BFLOAT16:
      h = t == HVDS_FLOAT16 ? to_half(f) : to_bf16(f);
      memcpy(e, &h, 2);
      break;
    case HVDS_FLOAT32:
      memcpy(e, &f, 4);
      break;
    default:
      memcpy(e, &x, 8);
  }
}

// cuda/quantize.cu's decode_kernel: per group of 4, the scale, the group's bytes, the values.
std::vector<uint8_t> emulate_decode(const std::vector<uint8_t>& src, size_t n, int bits,
                                    hvds_dtype_t t) {
  size_t nb = (n + kBucket - 1) / kBucket, end = nb * 4 + (n * bits + 7) / 8;
  size_t esz = hvds__dtype_bytes(t);
  int s = hvds__quant_levels(bits);
  std::vector<uint8_t> dst(n * esz);
  for (size_t first = 0; first < n; first += 4) {
    uint32_t sb = 0, group = 0;
    for (int k = 0; k < 4; k++) sb |= (uint32_t)src[first / kBucket * 4 + k] << (8 * k);
    size_t at = nb * 4 + first * bits / 8;
    for (int k = 0; k < bits / 2 && at + k < end; k++) group |= (uint32_t)src[at + k] << (8 * k);
    for (size_t j = 0; j < 4 && first + j < n; j++) {
      double d =
          hvds_hd_quant_value(hvds_hd_quant_unpack(group, (int)j, bits), s, hvds_hd_bits_f32(sb));
      store_as(t, d, &dst[(first + j) * esz], hvds_hd_float_to_half, hvds_hd_float_to_bf16);
    }
  }
  return dst;
}

// n values in dtype t, bucket by bucket of one kind: normal at a random magnitude, on the grid
// (levels of a bucket whose max is a level), zeros, with a NaN, with an infinity, past the
// float32 range (float64), tiny (subnormal float32).
std::vector<uint8_t> quant_input(hvds_dtype_t t, size_t n, int bits, std::mt19937_64& rng) {
  std::normal_distribution<double> normal;
  int s = hvds__quant_levels(bits);
  size_t esz = hvds__dtype_bytes(t);
  std::vector<uint8_t> out(n * esz);
  int kind = 0;
  for (size_t i = 0; i < n; i++) {
    if (i % kBucket == 0) kind = (int)(rng() % 8);
    double mag = std::ldexp(1.0, (int)(i / kBucket % 9) * 3 - 12), x = normal(rng) * mag;
    if (kind == 1) x = (double)((int)(rng() % (2 * s + 1)) - s) * 0.375 / s;  // on the grid
    if (kind == 1 && i % kBucket == 0) x = 0.375;                             // the bucket's max
    if (kind == 2) x = 0;
    if (kind == 3 && rng() % 300 == 0) x = NAN;
    if (kind == 4 && rng() % 300 == 0) x = rng() % 2 ? INFINITY : -INFINITY;
    if (kind == 5 && t == HVDS_FLOAT64 && rng() % 100 == 0) x = 1e39;
    if (kind == 6) x = normal(rng) * 1e-40;
    store_as(t, x, &out[i * esz], hvds__float_to_half, hvds__float_to_bf16);
  }
  return out;
}

TEST(CudaHostQuant, EmulatedGpuEncodeAndDecodeEqualOpsByteForByte) {
  std::mt19937_64 rng(3);
  for (hvds_dtype_t t : {HVDS_FLOAT16, HVDS_BFLOAT16, HVDS_FLOAT32, HVDS_FLOAT64}) {
    for (int bits : {2, 4, 8}) {
      for (size_t n : {size_t{1}, size_t{3}, size_t{5}, size_t{1023}, size_t{1024}, size_t{1025},
                       size_t{9001}}) {
        SCOPED_TRACE(::testing::Message() << "dtype " << t << " bits " << bits << " n " << n);
        std::vector<uint8_t> src = quant_input(t, n, bits, rng);
        uint64_t seed = rng();
        std::vector<uint8_t> want(hvds__quant_bytes(n, bits));
        ASSERT_EQ(hvds__quant_encode(src.data(), n, t, bits, seed, want.data()), HVDS_SUCCESS);
        std::vector<uint8_t> got = emulate_encode(load_all(t, src, n), bits, seed);
        ASSERT_EQ(got, want);
        std::vector<uint8_t> want_dec(n * hvds__dtype_bytes(t));
        ASSERT_EQ(hvds__quant_decode(want.data(), n, bits, t, want_dec.data()), HVDS_SUCCESS);
        ASSERT_EQ(emulate_decode(want, n, bits, t), want_dec);
      }
    }
  }
}

TEST(CudaHostQuant, ScaleIsTheSmallestFloatAtLeastTheMax) {
  std::mt19937_64 rng(4);
  for (int i = 0; i < 100000; i++) {
    double mx = std::ldexp((double)(rng() >> 11), (int)(rng() % 300) - 200 - 53);
    float sc = hvds_hd_quant_scale(mx);
    ASSERT_GE((double)sc, mx);
    if (mx > 0) {
      ASSERT_LT((double)std::nextafter(sc, 0.0f), mx) << mx;
    }
  }
  EXPECT_TRUE(std::isnan(hvds_hd_quant_scale(1e39)));
  EXPECT_TRUE(std::isnan(hvds_hd_quant_scale(INFINITY)));
  EXPECT_TRUE(std::isnan(hvds_hd_quant_scale(hvds_hd_quant_absmax(1.0, NAN))));
  EXPECT_TRUE(std::isnan(hvds_hd_quant_absmax(NAN, 2.0)));
  EXPECT_EQ(hvds_hd_quant_scale(0.0), 0.0f);
}

}  // namespace
