/* The device library's one export (ops/device/device_api.h): the table through which the
 * runtime and the launcher reach CUDA and NCCL without linking either. */
#include <cuda_runtime_api.h>
#include <stdio.h>

#include "device_api.h"
#include "nccl_backend.h"

static int cuda_runtime_version(void) {
  int v = 0;
  return cudaRuntimeGetVersion(&v) == cudaSuccess ? v : 0;
}

static int device_count(char* why, size_t why_len) {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) n = 0;
  if (why != NULL && why_len > 0)
    snprintf(why, why_len, "%s",
             err != cudaSuccess ? cudaGetErrorString(err)
             : n == 0           ? "the CUDA runtime sees no GPU"
                                : "");
  return n;
}

static const hvds_device_api_t table = {
    .version = HVDS_DEVICE_API_VERSION,
    .nccl_version = hvds__nccl_version,
    .cuda_runtime_version = cuda_runtime_version,
    .device_count = device_count,
};

__attribute__((visibility("default"))) const hvds_device_api_t* hvds_device_api_v1(void) {
  return &table;
}
