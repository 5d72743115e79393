// The GPU top-k with error feedback and the GPU quantizer (cuda/topk.cu, cuda/quantize.cu)
// against ops/: the indices, values, residual and count of hvds__topk_feedback() without a
// sample; the bytes of hvds__quant_encode() and the values of hvds__quant_decode(). Linked into
// gpu_kernels_test; needs a GPU (make test-gpu).
#include <gtest/gtest.h>

#include <limits>

#include "gpu_util.h"
#include "hvds_cuda.h"
#include "quantize.h"
#include "topk.h"

using namespace hvds_gpu_test;

namespace {

class GpuCompress : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_GT(device_count(), 0) << "these tests need a CUDA device"; }
};

template <class T>
std::vector<uint8_t> as_bytes(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!v.empty()) memcpy(b.data(), v.data(), b.size());
  return b;
}

// ---- Top-k ----

enum Kind { kNormal, kTies, kSparse, kSpecial };

// n values: distinct-ish normals; a few magnitudes (ties); mostly zeros; NaN, -inf, -0 and
// subnormals among normals.
template <class T>
std::vector<T> topk_values(Kind kind, size_t n, std::mt19937_64& rng) {
  std::normal_distribution<double> normal;
  std::vector<T> v(n);
  for (size_t i = 0; i < n; i++) {
    T x = (T)normal(rng);
    if (kind == kTies) x = (T)((double)(rng() % 4) * 0.5 * (rng() % 2 ? 1 : -1));
    if (kind == kSparse && rng() % 16 != 0) x = T(0);
    if (kind == kSpecial) {
      uint64_t r = rng() % 12;
      if (r == 0) x = std::numeric_limits<T>::quiet_NaN();
      if (r == 1) x = -std::numeric_limits<T>::infinity();
      if (r == 2) x = -T(0);
      if (r == 3) x = std::numeric_limits<T>::denorm_min() * (T)(rng() % 5);
    }
    v[i] = x;
  }
  return v;
}

// One call on each side; everything compared. The inputs' NaNs share one payload, so NaNs made
// by acc + grad tie on both sides and the same NaNs are selected.
template <class T>
void check_topk(const std::vector<T>& acc0, const std::vector<T>* grad, size_t k,
                hvds_dtype_t index_dtype) {
  const hvds_dtype_t dt = sizeof(T) == 4 ? HVDS_FLOAT32 : HVDS_FLOAT64;
  size_t n = acc0.size(), room = std::max<size_t>(1, std::min(k, n));
  SCOPED_TRACE(::testing::Message() << "dtype " << dt << " index " << index_dtype << " n " << n
                                    << " k " << k << (grad ? " with grad" : ""));
  std::vector<T> want_acc = acc0, want_vals(room);
  std::vector<int64_t> want_idx(room);
  int64_t want_count = -1;
  hvds_topk_plan_t plan = {(int64_t)k, 0, 0, 0};
  ASSERT_EQ(
      hvds__topk_feedback(want_acc.data(), grad ? grad->data() : nullptr, dt, (int64_t)n, &plan,
                          want_idx.data(), HVDS_INT64, want_vals.data(), &want_count, nullptr),
      HVDS_SUCCESS);
  size_t isz = index_dtype == HVDS_INT32 ? 4 : 8;
  DeviceBuf acc(acc0), g(grad ? *grad : std::vector<T>()), idx(room * isz), vals(room * sizeof(T)),
      count(8), ws(hvds__cuda_topk_workspace(n));
  CUDA_OK(cudaMemset(ws.get(), 0xa5, ws.bytes()));  // the call must not rely on a clean workspace
  ASSERT_EQ(hvds__cuda_topk_feedback(acc.get(), grad ? g.get() : nullptr, dt, n, k, idx.get(),
                                     index_dtype, vals.get(), count.as<uint64_t>(), ws.get(),
                                     ws.bytes(), nullptr),
            HVDS_SUCCESS);
  ASSERT_EQ(count.download_as<uint64_t>(1)[0], (uint64_t)want_count);
  std::vector<uint8_t> gi = idx.download();
  for (int64_t j = 0; j < want_count; j++) {
    int64_t got = 0;
    if (isz == 4) {
      int32_t i32;
      memcpy(&i32, &gi[j * 4], 4);
      got = i32;
    } else {
      memcpy(&got, &gi[j * 8], 8);
    }
    ASSERT_EQ(got, want_idx[j]) << "entry " << j;
  }
  std::vector<uint8_t> gv = vals.download(want_count * sizeof(T));
  want_vals.resize(want_count);
  ASSERT_TRUE(same_elems(dt, gv, as_bytes(want_vals))) << "values";
  ASSERT_TRUE(same_elems(dt, acc.download(), as_bytes(want_acc))) << "residual";
}

template <class T>
void topk_sweep(uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (size_t n : {size_t{1}, size_t{2047}, size_t{2048}, size_t{2049}, size_t{100003}}) {
    for (Kind kind : {kNormal, kTies, kSparse, kSpecial}) {
      std::vector<T> acc = topk_values<T>(kind, n, rng), grad = topk_values<T>(kNormal, n, rng);
      for (size_t k : {size_t{1}, size_t{7}, n / 100 + 1, n - 1, n, n + 3}) {
        if (k == 0) continue;
        hvds_dtype_t it = (k + n) % 2 ? HVDS_INT32 : HVDS_INT64;
        check_topk<T>(acc, nullptr, k, it);
        check_topk<T>(acc, &grad, k, it == HVDS_INT32 ? HVDS_INT64 : HVDS_INT32);
      }
    }
  }
  // One larger tensor: more tiles than a block, and the histogram's 512-block cap.
  size_t n = (1u << 21) + 5;
  std::vector<T> acc = topk_values<T>(kNormal, n, rng), grad = topk_values<T>(kTies, n, rng);
  check_topk<T>(acc, &grad, n / 100, HVDS_INT64);
}

TEST_F(GpuCompress, TopkEqualsOpsFloat32) { topk_sweep<float>(11); }

TEST_F(GpuCompress, TopkEqualsOpsFloat64) { topk_sweep<double>(12); }

TEST_F(GpuCompress, TopkWithoutSelectionStillAccumulates) {
  std::vector<float> acc = {1, -2, 3}, grad = {0.5f, 0.5f, 0.5f};
  DeviceBuf a(acc), g(grad), count(8), ws(hvds__cuda_topk_workspace(3));
  ASSERT_EQ(hvds__cuda_topk_feedback(a.get(), g.get(), HVDS_FLOAT32, 3, 0, nullptr, HVDS_INT32,
                                     nullptr, count.as<uint64_t>(), ws.get(), ws.bytes(), nullptr),
            HVDS_SUCCESS);
  EXPECT_EQ(count.download_as<uint64_t>(1)[0], 0u);
  EXPECT_EQ(a.download_as<float>(3), (std::vector<float>{1.5f, -1.5f, 3.5f}));
  ASSERT_EQ(hvds__cuda_topk_feedback(nullptr, nullptr, HVDS_FLOAT64, 0, 5, nullptr, HVDS_INT64,
                                     nullptr, count.as<uint64_t>(), ws.get(), ws.bytes(), nullptr),
            HVDS_SUCCESS);
  EXPECT_EQ(count.download_as<uint64_t>(1)[0], 0u);
}

TEST_F(GpuCompress, TopkRefusesBadArguments) {
  DeviceBuf a(64), i(64), v(64), count(8), ws(hvds__cuda_topk_workspace(16));
  auto call = [&](hvds_dtype_t dt, size_t n, hvds_dtype_t it, size_t ws_bytes) {
    return hvds__cuda_topk_feedback(a.get(), nullptr, dt, n, 4, i.get(), it, v.get(),
                                    count.as<uint64_t>(), ws.get(), ws_bytes, nullptr);
  };
  EXPECT_EQ(call(HVDS_FLOAT16, 16, HVDS_INT32, ws.bytes()), HVDS_NOT_SUPPORTED);
  EXPECT_EQ(call(HVDS_FLOAT32, 16, HVDS_FLOAT32, ws.bytes()), HVDS_INVALID_ARGUMENT);
  EXPECT_EQ(call(HVDS_FLOAT32, (size_t)1 << 31, HVDS_INT32, ws.bytes()), HVDS_INVALID_ARGUMENT);
  EXPECT_EQ(call(HVDS_FLOAT32, 16, HVDS_INT32, ws.bytes() - 1), HVDS_INVALID_ARGUMENT);
  EXPECT_EQ(call(HVDS_FLOAT32, 16, HVDS_INT32, ws.bytes()), HVDS_SUCCESS);
}

// ---- Quantization ----

// n values of dtype t, bucket by bucket of one kind: random bit patterns (NaN and Inf buckets
// among them), normals at a bucket's magnitude, levels on the grid, zeros.
std::vector<uint8_t> quant_values(hvds_dtype_t t, size_t n, int bits, std::mt19937_64& rng) {
  std::mt19937 r32((uint32_t)rng());
  std::vector<uint8_t> out = random_elems(t, n, r32);
  std::normal_distribution<double> normal;
  int s = hvds__quant_levels(bits);
  size_t esz = hvds__dtype_bytes(t);
  for (size_t first = 0; first < n; first += HVDS_QUANT_BUCKET) {
    int kind = (int)(rng() % 4);
    double mag = std::ldexp(1.0, (int)(rng() % 40) - 20);
    for (size_t i = first; i < n && i < first + HVDS_QUANT_BUCKET && kind > 0; i++) {
      double x = kind == 1   ? normal(rng) * mag
                 : kind == 2 ? (double)((int)(rng() % (2 * s + 1)) - s) * mag / s
                             : 0.0;
      float f = (float)x;
      uint16_t h = t == HVDS_FLOAT16 ? hvds__float_to_half(f) : hvds__float_to_bf16(f);
      uint8_t* e = &out[i * esz];
      if (t == HVDS_FLOAT64)
        memcpy(e, &x, 8);
      else if (t == HVDS_FLOAT32)
        memcpy(e, &f, 4);
      else
        memcpy(e, &h, 2);
    }
  }
  return out;
}

TEST_F(GpuCompress, QuantEncodeGivesOpsBytesAndDecodeOpsValues) {
  std::mt19937_64 rng(13);
  for (hvds_dtype_t t : {HVDS_FLOAT16, HVDS_BFLOAT16, HVDS_FLOAT32, HVDS_FLOAT64}) {
    for (int bits : {2, 4, 8}) {
      for (size_t n : {size_t{1}, size_t{5}, size_t{1024}, size_t{1025}, size_t{300007}}) {
        SCOPED_TRACE(::testing::Message() << "dtype " << t << " bits " << bits << " n " << n);
        std::vector<uint8_t> src = quant_values(t, n, bits, rng);
        uint64_t seed = rng();
        size_t bytes = hvds__quant_bytes(n, bits);
        std::vector<uint8_t> want(bytes), want_dec(n * hvds__dtype_bytes(t));
        ASSERT_EQ(hvds__quant_encode(src.data(), n, t, bits, seed, want.data()), HVDS_SUCCESS);
        ASSERT_EQ(hvds__quant_decode(want.data(), n, bits, t, want_dec.data()), HVDS_SUCCESS);
        // Encode one byte into a buffer of 0xab: unaligned, and every byte must be written.
        DeviceBuf d_src(src), d_enc(bytes + 1), d_bytes(want), d_dec(want_dec.size());
        CUDA_OK(cudaMemset(d_enc.get(), 0xab, bytes + 1));
        ASSERT_EQ(
            hvds__cuda_quant_encode(d_src.get(), n, t, bits, seed, d_enc.as<char>() + 1, nullptr),
            HVDS_SUCCESS);
        std::vector<uint8_t> got = d_enc.download();
        ASSERT_EQ(std::vector<uint8_t>(got.begin() + 1, got.end()), want);
        ASSERT_EQ(hvds__cuda_quant_decode(d_bytes.get(), n, bits, t, d_dec.get(), nullptr),
                  HVDS_SUCCESS);
        ASSERT_TRUE(same_elems(t, d_dec.download(), want_dec));
      }
    }
  }
}

TEST_F(GpuCompress, QuantRefusesWhatOpsRefuses) {
  DeviceBuf a(64), b(64);
  EXPECT_EQ(hvds__cuda_quant_encode(a.get(), 4, HVDS_FLOAT32, 3, 0, b.get(), nullptr),
            HVDS_INVALID_ARGUMENT);
  EXPECT_EQ(hvds__cuda_quant_encode(a.get(), 4, HVDS_INT32, 4, 0, b.get(), nullptr),
            HVDS_INVALID_ARGUMENT);
  EXPECT_EQ(hvds__cuda_quant_decode(a.get(), 4, 16, HVDS_FLOAT32, b.get(), nullptr),
            HVDS_INVALID_ARGUMENT);
  EXPECT_EQ(hvds__cuda_quant_encode(nullptr, 0, HVDS_FLOAT32, 4, 0, nullptr, nullptr),
            HVDS_SUCCESS);
}

}  // namespace
