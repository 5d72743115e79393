/* The quantizer on the GPU for the device library (device_api.h quant_encode, quant_decode): the
 * cuda/ kernels on the caller's stream of the caller's GPU; the host does not wait. */
#include "device_quant.h"

#include <cuda_runtime_api.h>
#include <stdio.h>

#include "current_device.h"
#include "hvds_cuda.h"

/* The kernel's result as the interface's: 0, or -1 with why. */
static int finish(cudaError_t set, hvds_result_t rc, const char* what, char* why, size_t why_len) {
  if (set != cudaSuccess) {
    snprintf(why, why_len, "cudaSetDevice: %s", cudaGetErrorString(set));
    (void)cudaGetLastError();
    return -1;
  }
  if (rc == HVDS_SUCCESS) return 0;
  snprintf(why, why_len,
           "the quantizer's %s kernel failed (result %d; the log gives CUDA's reason)", what,
           (int)rc);
  return -1;
}

int hvds__device_quant_encode(int device, int64_t stream, const void* src, size_t n, int dtype,
                              int bits, uint64_t seed, void* dst, char* why, size_t why_len) {
  int previous = hvds__current_device();
  cudaError_t set = cudaSetDevice(device);
  hvds_result_t rc = HVDS_SUCCESS;
  if (set == cudaSuccess)
    rc = hvds__cuda_quant_encode(src, n, (hvds_dtype_t)dtype, bits, seed, dst,
                                 (hvds_cuda_stream_t)(intptr_t)stream);
  hvds__restore_device(previous);
  return finish(set, rc, "encode", why, why_len);
}

int hvds__device_quant_decode(int device, int64_t stream, const void* src, size_t n, int bits,
                              int dtype, void* dst, char* why, size_t why_len) {
  int previous = hvds__current_device();
  cudaError_t set = cudaSetDevice(device);
  hvds_result_t rc = HVDS_SUCCESS;
  if (set == cudaSuccess)
    rc = hvds__cuda_quant_decode(src, n, bits, (hvds_dtype_t)dtype, dst,
                                 (hvds_cuda_stream_t)(intptr_t)stream);
  hvds__restore_device(previous);
  return finish(set, rc, "decode", why, why_len);
}
