// The one device-wide primitive the sparse kernels share: an exclusive prefix sum (CUB).
#include <cub/device/device_scan.cuh>

#include "cuda_internal.cuh"

namespace hvds_cuda {

hvds_result_t scan_u64(const uint64_t* d_in, uint64_t* d_out, size_t n, void* temp,
                       size_t* temp_bytes, cudaStream_t s) {
  // CUB takes an int count: longer arrays are not produced by our plans (tile counts, words).
  if (n > 0x7fffffff) return HVDS_INVALID_ARGUMENT;
  if (temp == nullptr) {
    HVDS_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, *temp_bytes, d_in, d_out, (int)n, s));
    if (*temp_bytes == 0) *temp_bytes = 1;
    return HVDS_SUCCESS;
  }
  if (n == 0) return HVDS_SUCCESS;
  HVDS_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp, *temp_bytes, d_in, d_out, (int)n, s));
  return HVDS_SUCCESS;
}

}  // namespace hvds_cuda
