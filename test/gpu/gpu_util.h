// Helpers of the GPU tests: device buffers, uploads and downloads, random elements, and the
// NaN-tolerant comparison (GPU arithmetic returns a canonical NaN, the CPU keeps payloads).
#ifndef HVDS_TEST_GPU_UTIL_H_
#define HVDS_TEST_GPU_UTIL_H_

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "../common/random_elems.h"
#include "reduce.h"

#define CUDA_OK(call)                                                                        \
  do {                                                                                       \
    cudaError_t cuda_ok_rc_ = (call);                                                        \
    ASSERT_EQ(cuda_ok_rc_, cudaSuccess) << #call << ": " << cudaGetErrorString(cuda_ok_rc_); \
  } while (0)

namespace hvds_gpu_test {

// Device memory freed at scope exit.
class DeviceBuf {
 public:
  explicit DeviceBuf(size_t bytes) : bytes_(bytes) {
    if (cudaMalloc(&p_, bytes > 0 ? bytes : 1) != cudaSuccess) p_ = nullptr;
  }
  DeviceBuf(const void* host, size_t bytes) : DeviceBuf(bytes) {
    // A copy from pageable memory may return before its DMA lands; the code under test runs on
    // non-blocking streams that would not wait for it.
    if (p_ && bytes) cudaMemcpy(p_, host, bytes, cudaMemcpyHostToDevice);
    cudaDeviceSynchronize();
  }
  template <class T>
  explicit DeviceBuf(const std::vector<T>& v) : DeviceBuf(v.data(), v.size() * sizeof(T)) {}
  ~DeviceBuf() { cudaFree(p_); }
  DeviceBuf(const DeviceBuf&) = delete;
  DeviceBuf& operator=(const DeviceBuf&) = delete;
  void* get() const { return p_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(p_);
  }
  size_t bytes() const { return bytes_; }
  // The first bytes (all by default) copied back after the device finished.
  std::vector<uint8_t> download(size_t bytes = SIZE_MAX) const {
    if (bytes == SIZE_MAX) bytes = bytes_;
    std::vector<uint8_t> v(bytes);
    cudaDeviceSynchronize();
    if (bytes) cudaMemcpy(v.data(), p_, bytes, cudaMemcpyDeviceToHost);
    return v;
  }
  template <class T>
  std::vector<T> download_as(size_t n) const {
    std::vector<T> v(n);
    cudaDeviceSynchronize();
    if (n) cudaMemcpy(v.data(), p_, n * sizeof(T), cudaMemcpyDeviceToHost);
    return v;
  }

 private:
  void* p_ = nullptr;
  size_t bytes_;
};

using hvds_test::random_elems;

inline double elem_as_double(hvds_dtype_t t, const uint8_t* p) {
  switch (t) {
    case HVDS_FLOAT16:
    case HVDS_BFLOAT16: {
      uint16_t b;
      memcpy(&b, p, 2);
      return t == HVDS_FLOAT16 ? hvds__half_to_float(b) : hvds__bf16_to_float(b);
    }
    case HVDS_FLOAT32: {
      float f;
      memcpy(&f, p, 4);
      return f;
    }
    case HVDS_FLOAT64: {
      double d;
      memcpy(&d, p, 8);
      return d;
    }
    default:
      return 0;
  }
}

// Bitwise equal, any NaN matching any NaN.
inline ::testing::AssertionResult same_elems(hvds_dtype_t t, const std::vector<uint8_t>& got,
                                             const std::vector<uint8_t>& want) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << got.size() << " bytes, want " << want.size();
  size_t esz = hvds__dtype_bytes(t), n = got.size() / esz;
  for (size_t i = 0; i < n; i++) {
    if (memcmp(&got[i * esz], &want[i * esz], esz) == 0) continue;
    if (std::isnan(elem_as_double(t, &got[i * esz])) &&
        std::isnan(elem_as_double(t, &want[i * esz])))
      continue;
    return ::testing::AssertionFailure() << "element " << i << " of " << n << " differs";
  }
  return ::testing::AssertionSuccess();
}

inline int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

}  // namespace hvds_gpu_test

#endif  // HVDS_TEST_GPU_UTIL_H_
