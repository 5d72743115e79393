// What the kernel files of cuda/ share: dtype dispatch, launch sizes, workspace carving, and the
// mapping of CUDA errors to hvds_result_t. CUDA C++ only; not for use outside cuda/.
#ifndef HVDS_CUDA_INTERNAL_CUH_
#define HVDS_CUDA_INTERNAL_CUH_

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda_check.h"
#include "elem_ops.h"
#include "hvds_cuda.h"

namespace hvds_cuda {

constexpr unsigned kThreads = 256;    // threads per block of the grid-stride kernels
constexpr size_t kMaxBlocks = 65536;  // grid-stride kernels never launch more blocks
constexpr size_t kAlign = 256;        // workspace pieces start on this boundary

inline cudaStream_t as_stream(hvds_cuda_stream_t s) { return reinterpret_cast<cudaStream_t>(s); }

// Blocks for a grid-stride loop over n items (at least 1).
inline unsigned grid_for(size_t n, unsigned threads = kThreads) {
  size_t b = (n + threads - 1) / threads;
  if (b == 0) b = 1;
  return (unsigned)(b < kMaxBlocks ? b : kMaxBlocks);
}

// The result of the launches just made: HVDS_SYSTEM_ERROR (logged, error state reset) if any
// failed to launch.
inline hvds_result_t launched(const char* what) {
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return HVDS_SUCCESS;
  HVDS_WARN("cuda: %s: kernel launch failed: %s", what, cudaGetErrorString(e));
  return HVDS_SYSTEM_ERROR;
}

// Calls f(T{}) with T the storage type of dtype; HVDS_NOT_SUPPORTED for an unknown dtype.
template <class F>
hvds_result_t dispatch(hvds_dtype_t dtype, F&& f) {
  return hvds_elem::with_dtype(dtype, f, [] { return HVDS_NOT_SUPPORTED; });
}

// Calls f(I{}) with I the index type of lay (int32_t or int64_t).
template <class F>
hvds_result_t dispatch_index(hvds_dtype_t index_dtype, F&& f) {
  if (index_dtype == HVDS_INT32) return f(int32_t{});
  if (index_dtype == HVDS_INT64) return f(int64_t{});
  return HVDS_INVALID_ARGUMENT;
}

// Cuts a workspace into aligned pieces. With base NULL it only adds up the sizes, so the same
// plan function answers the *_workspace() query and lays out the real workspace.
struct Carve {
  char* base;
  size_t used;
  template <class T>
  T* take(size_t n) {
    size_t at = (used + kAlign - 1) / kAlign * kAlign;
    used = at + n * sizeof(T);
    return base ? reinterpret_cast<T*>(base + at) : nullptr;
  }
};

// The layout checks every sparse entry point makes (ops/sparse/sparse_stream.h's rules).
inline hvds_result_t check_layout(const hvds_sparse_layout_t* lay) {
  if (lay == nullptr) return HVDS_INVALID_ARGUMENT;
  char err[160];
  hvds_result_t rc = hvds__sparse_layout_check(lay, err, sizeof err);
  if (rc != HVDS_SUCCESS) HVDS_WARN("cuda: %s", err);
  return rc;
}

// Exclusive prefix sum of n uint64 (CUB), d_in may equal d_out. temp NULL: *temp_bytes is set.
hvds_result_t scan_u64(const uint64_t* d_in, uint64_t* d_out, size_t n, void* temp,
                       size_t* temp_bytes, cudaStream_t s);

// Row mover of the sparse kernels: for i < n (n_dev non-NULL: i < min(n, *n_dev)), row i of src
// goes to row perm[i] of dst (perm NULL: row i; perm[i] == UINT64_MAX: dropped). Rows are `row`
// elements of T.
template <class T>
__global__ void move_rows(const T* src, const uint64_t* perm, size_t n, const uint64_t* n_dev,
                          size_t row, T* dst) {
  size_t limit = n;
  if (n_dev != nullptr && *n_dev < limit) limit = *n_dev;
  size_t total = limit * row;
  for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < total;
       k += (size_t)gridDim.x * blockDim.x) {
    size_t i = k / row, j = k - i * row;
    uint64_t to = perm ? perm[i] : i;
    if (to != UINT64_MAX) dst[to * row + j] = src[k];
  }
}

// Row gather: for i < n (n_dev non-NULL: i < min(n, *n_dev)), row i of dst = row idx[i] of
// dense. Rows are `row` elements of T; I is the index type.
template <class T, class I>
__global__ void gather_rows_kernel(const T* dense, const I* idx, size_t n, const uint64_t* n_dev,
                                   size_t row, T* dst) {
  size_t limit = n;
  if (n_dev != nullptr && *n_dev < limit) limit = *n_dev;
  size_t total = limit * row;
  for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < total;
       k += (size_t)gridDim.x * blockDim.x) {
    size_t i = k / row, j = k - i * row;
    dst[k] = dense[(size_t)idx[i] * row + j];
  }
}

}  // namespace hvds_cuda

#endif  // HVDS_CUDA_INTERNAL_CUH_
