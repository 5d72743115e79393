// hvds_quantize and hvds_dequantize: host memory by the CPU's coder, GPU memory through the
// device library's quant_encode and quant_decode, here the fake's (fake_device_quant.c, which
// runs the CPU coder on host copies). This proves the entries' checks, the stream they queue
// on and that both sides give the same bytes by contract; the kernels are checked on a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gpu_tensors.h"

namespace {

using namespace hvds_test;  // NOLINT: the shared helpers of gpu_tensors.h

std::vector<float> Values(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; i++) v[i] = std::sin(0.37 * (double)i) * (1.0 + (double)(i % 7));
  return v;
}

TEST(DeviceQuant, BytesOfAnEncoding) {
  // 2500 values: 3 float32 scales and 1250 bytes of 4-bit codes, padded to 8.
  EXPECT_EQ(hvds_quantized_bytes(2500, 4), 1264);
  EXPECT_EQ(hvds_quantized_bytes(1024, 8), 1032) << "1024 one-byte codes and a scale, padded";
  EXPECT_EQ(hvds_quantized_bytes(0, 4), 0);
  EXPECT_EQ(hvds_quantized_bytes(100, 3), 0) << "not a width";
}

TEST(DeviceQuant, EncodeAndDecodeOnTheCallersStreamGiveTheHostsBytes) {
  const int64_t n = 2500;
  const int bits = 4;
  const uint64_t seed = 0x1234abcdULL;
  std::vector<float> v = Values(n);
  const int64_t qb = hvds_quantized_bytes(n, bits);
  std::vector<uint8_t> host_q(qb);
  ASSERT_EQ(hvds_quantize(-1, 0, v.data(), n, HVDS_FLOAT32, bits, seed, host_q.data()),
            HVDS_SUCCESS)
      << hvds_last_error();
  std::vector<float> host_back(n);
  ASSERT_EQ(hvds_dequantize(-1, 0, host_q.data(), n, bits, HVDS_FLOAT32, host_back.data()),
            HVDS_SUCCESS);
  for (int64_t i = 0; i < n; i++) ASSERT_LT(std::fabs(host_back[i] - v[i]), 7.0 / 7 + 1e-6) << i;

  DeviceBytes d_v(v.data(), n * 4, 1), d_q(nullptr, qb, 1), d_back(nullptr, n * 4, 1);
  long before = Fake::Get().stats().quant_calls;
  ASSERT_EQ(hvds_quantize(1, 77, d_v.get(), n, HVDS_FLOAT32, bits, seed, d_q.get()), HVDS_SUCCESS)
      << hvds_last_error();
  EXPECT_EQ(Fake::Get().stats().last_quant_stream, 77) << "queued on the caller's stream";
  ASSERT_EQ(hvds_dequantize(1, 78, d_q.get(), n, bits, HVDS_FLOAT32, d_back.get()), HVDS_SUCCESS)
      << hvds_last_error();
  EXPECT_EQ(Fake::Get().stats().quant_calls, before + 2);
  EXPECT_EQ(Fake::Get().stats().last_quant_stream, 78);
  EXPECT_EQ(d_q.Read<uint8_t>(), host_q);
  EXPECT_EQ(d_back.Read<float>(), host_back);
}

TEST(DeviceQuant, BadArgumentsAreNamedAndChangeNothing) {
  std::vector<float> v = Values(16);
  std::vector<uint8_t> stale(64, 0xAB);
  DeviceBytes d_v(v.data(), 64, 0), d_q(stale.data(), 64, 0);
  long before = Fake::Get().stats().quant_calls;
  struct Case {
    int32_t device;
    int64_t n;
    hvds_dtype_t dtype;
    int32_t bits;
    bool null_dst;
    const char* says;
  } cases[] = {
      {0, 16, HVDS_FLOAT32, 3, false, "bits must be 2, 4 or 8, not 3"},
      {0, 16, HVDS_INT32, 4, false, "dtype INT32 cannot be quantized"},
      {0, -1, HVDS_FLOAT32, 4, false, "n = -1 is negative"},
      {0, 16, HVDS_FLOAT32, 4, true, "dst is NULL"},
      {-1, 16, HVDS_FLOAT32, 3, false, "bits must be 2, 4 or 8, not 3"},
  };
  for (const Case& c : cases) {
    void* dst = c.null_dst ? nullptr : c.device < 0 ? (void*)stale.data() : d_q.get();
    const void* src = c.device < 0 ? (const void*)v.data() : d_v.get();
    EXPECT_EQ(hvds_quantize(c.device, 0, src, c.n, c.dtype, c.bits, 1, dst), HVDS_INVALID_ARGUMENT)
        << c.says;
    EXPECT_NE(std::string(hvds_last_error()).find(std::string("hvds_quantize: ") + c.says),
              std::string::npos)
        << hvds_last_error();
    EXPECT_EQ(hvds_dequantize(c.device, 0, src, c.n, c.bits, c.dtype, dst), HVDS_INVALID_ARGUMENT)
        << c.says;
    EXPECT_NE(std::string(hvds_last_error()).find(std::string("hvds_dequantize: ") + c.says),
              std::string::npos)
        << hvds_last_error();
  }
  EXPECT_EQ(Fake::Get().stats().quant_calls, before);
  EXPECT_EQ(d_q.Read<uint8_t>(), stale);
  EXPECT_EQ(stale, std::vector<uint8_t>(64, 0xAB));
}

TEST(DeviceQuant, MemoryOfAnotherGpuFailsWithTheLibrarysReason) {
  std::vector<float> v = Values(16);
  DeviceBytes d_v(v.data(), 64, 1), d_q(nullptr, 64, 0);
  EXPECT_EQ(hvds_quantize(0, 0, d_v.get(), 16, HVDS_FLOAT32, 8, 1, d_q.get()), HVDS_SYSTEM_ERROR);
  std::string why = hvds_last_error();
  EXPECT_NE(why.find("hvds_quantize on GPU 0"), std::string::npos) << why;
  EXPECT_NE(why.find("src is not memory of GPU 0"), std::string::npos) << why;
}

}  // namespace
