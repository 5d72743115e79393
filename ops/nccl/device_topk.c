/* Compression.topk on the GPU for the device library (device_api.h topk_feedback): the cuda/
 * kernel on the caller's stream, its workspace taken from and given back to CUDA's stream-ordered
 * pool, so the host never waits. */
#include "device_topk.h"

#include <cuda_runtime_api.h>
#include <stdio.h>

#include "current_device.h"
#include "dtype.h"
#include "hvds_cuda.h"

enum { kCountBytes = 256 }; /* the device count, kept apart so the workspace stays aligned */

int hvds__device_topk_feedback(int device, int64_t stream, void* acc, const void* grad, int dtype,
                               size_t n, size_t k, void* indices, int index_dtype, void* values,
                               char* why, size_t why_len) {
  if (n == 0) return 0;  // nothing to accumulate or select
  if (k > n) k = n;
  size_t ws_bytes = hvds__cuda_topk_workspace(n);
  size_t index_size = hvds__dtype_bytes((hvds_dtype_t)index_dtype);
  size_t value_size = hvds__dtype_bytes((hvds_dtype_t)dtype);
  cudaStream_t s = (cudaStream_t)(intptr_t)stream;
  int previous = hvds__current_device();
  char* ws = NULL;
  const char* what = "cudaSetDevice";
  cudaError_t err = cudaSetDevice(device);
  if (err == cudaSuccess)
    what = "cudaMallocAsync", err = cudaMallocAsync((void**)&ws, kCountBytes + ws_bytes, s);
  /* slots past the count stay (0, 0): the kernel writes only the entries it selects */
  if (err == cudaSuccess && k > 0)
    what = "cudaMemsetAsync", err = cudaMemsetAsync(indices, 0, k * index_size, s);
  if (err == cudaSuccess && k > 0) err = cudaMemsetAsync(values, 0, k * value_size, s);
  hvds_result_t rc = HVDS_SUCCESS;
  if (err == cudaSuccess)
    rc = hvds__cuda_topk_feedback(acc, grad, (hvds_dtype_t)dtype, n, k, indices,
                                  (hvds_dtype_t)index_dtype, values, (uint64_t*)ws,
                                  ws + kCountBytes, ws_bytes, (hvds_cuda_stream_t)s);
  if (ws != NULL) cudaFreeAsync(ws, s);
  hvds__restore_device(previous);
  if (err != cudaSuccess) {
    snprintf(why, why_len, "%s: %s", what, cudaGetErrorString(err));
    (void)cudaGetLastError();
    return -1;
  }
  if (rc != HVDS_SUCCESS) {
    snprintf(why, why_len, "the top-k kernel failed (result %d; the log gives CUDA's reason)",
             (int)rc);
    return -1;
  }
  return 0;
}
