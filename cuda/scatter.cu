// Row scatter (copy, add, atomic add) and row gather (hvds_cuda.h): the GPU forms of
// hvds__sstream_to_dense and hvds__sstream_add_into. One thread per value, so rows are read and
// written coalesced whatever their width.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda_internal.cuh"

namespace hvds_cuda {
namespace {

// dense[i] += v with an atomic, for the types that have one (sm_80 and later for bfloat16).
template <class T>
__device__ void atomic_add(T* dst, T v) {
  using hvds_elem::bf16;
  using hvds_elem::f16;
  if constexpr (std::is_same<T, float>::value || std::is_same<T, double>::value) {
    atomicAdd(dst, v);
  } else if constexpr (std::is_same<T, int32_t>::value) {
    atomicAdd(reinterpret_cast<int*>(dst), (int)v);
  } else if constexpr (std::is_same<T, int64_t>::value) {
    // Two's complement: the unsigned sum wraps exactly as the CPU's signed one does.
    atomicAdd(reinterpret_cast<unsigned long long*>(dst), (unsigned long long)v);
  } else if constexpr (std::is_same<T, f16>::value) {
    atomicAdd(reinterpret_cast<__half*>(dst), __ushort_as_half(v.bits));
  } else if constexpr (std::is_same<T, bf16>::value) {
    atomicAdd(reinterpret_cast<__nv_bfloat16*>(dst), __ushort_as_bfloat16(v.bits));
  }
}

template <class T>
constexpr bool has_atomic_add_v =
    std::is_same<T, float>::value || std::is_same<T, double>::value ||
    std::is_same<T, int32_t>::value || std::is_same<T, int64_t>::value ||
    std::is_same<T, hvds_elem::f16>::value || std::is_same<T, hvds_elem::bf16>::value;

template <class T, class I, int kMode>
__global__ void scatter_kernel(const I* idx, const T* vals, size_t n, size_t row, size_t dim,
                               T* dense) {
  size_t total = n * row;
  for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < total;
       k += (size_t)gridDim.x * blockDim.x) {
    size_t i = k / row, j = k - i * row;
    uint64_t r = (uint64_t)idx[i];  // a negative index becomes huge and is skipped
    if (r >= dim) continue;
    T* d = dense + r * row + j;
    if constexpr (kMode == HVDS_CUDA_SCATTER_COPY)
      *d = vals[k];
    else if constexpr (kMode == HVDS_CUDA_SCATTER_ADD)
      *d = hvds_elem::combine<hvds_elem::kSum>(*d, vals[k]);
    else
      atomic_add(d, vals[k]);
  }
}

}  // namespace
}  // namespace hvds_cuda

using namespace hvds_cuda;

extern "C" hvds_result_t hvds__cuda_scatter(const hvds_sparse_layout_t* lay, const void* d_idx,
                                            const void* d_vals, size_t n, void* d_dense,
                                            hvds_cuda_scatter_mode_t mode,
                                            hvds_cuda_stream_t stream) {
  HVDS_CHECK(check_layout(lay));
  if (mode != HVDS_CUDA_SCATTER_COPY && mode != HVDS_CUDA_SCATTER_ADD &&
      mode != HVDS_CUDA_SCATTER_ADD_ATOMIC)
    return HVDS_INVALID_ARGUMENT;
  cudaStream_t s = as_stream(stream);
  return dispatch(lay->dtype, [&](auto tag) -> hvds_result_t {
    using T = decltype(tag);
    if (mode == HVDS_CUDA_SCATTER_ADD_ATOMIC && !has_atomic_add_v<T>) return HVDS_NOT_SUPPORTED;
    if (n == 0) return HVDS_SUCCESS;
    if (d_idx == nullptr || d_vals == nullptr || d_dense == nullptr) return HVDS_INVALID_ARGUMENT;
    return dispatch_index(lay->index_dtype, [&](auto itag) -> hvds_result_t {
      using I = decltype(itag);
      const I* idx = static_cast<const I*>(d_idx);
      const T* vals = static_cast<const T*>(d_vals);
      T* dense = static_cast<T*>(d_dense);
      unsigned g = grid_for(n * lay->row);
      if (mode == HVDS_CUDA_SCATTER_COPY)
        scatter_kernel<T, I, HVDS_CUDA_SCATTER_COPY>
            <<<g, kThreads, 0, s>>>(idx, vals, n, lay->row, lay->dim, dense);
      else if (mode == HVDS_CUDA_SCATTER_ADD)
        scatter_kernel<T, I, HVDS_CUDA_SCATTER_ADD>
            <<<g, kThreads, 0, s>>>(idx, vals, n, lay->row, lay->dim, dense);
      else if constexpr (has_atomic_add_v<T>)
        scatter_kernel<T, I, HVDS_CUDA_SCATTER_ADD_ATOMIC>
            <<<g, kThreads, 0, s>>>(idx, vals, n, lay->row, lay->dim, dense);
      return launched("scatter");
    });
  });
}

extern "C" hvds_result_t hvds__cuda_gather_rows(const hvds_sparse_layout_t* lay,
                                                const void* d_dense, const void* d_idx, size_t n,
                                                void* d_vals_out, hvds_cuda_stream_t stream) {
  HVDS_CHECK(check_layout(lay));
  if (n == 0) return HVDS_SUCCESS;
  if (d_dense == nullptr || d_idx == nullptr || d_vals_out == nullptr) return HVDS_INVALID_ARGUMENT;
  cudaStream_t s = as_stream(stream);
  return dispatch(lay->dtype, [&](auto tag) -> hvds_result_t {
    using T = decltype(tag);
    return dispatch_index(lay->index_dtype, [&](auto itag) -> hvds_result_t {
      using I = decltype(itag);
      gather_rows_kernel<T, I><<<grid_for(n * lay->row), kThreads, 0, s>>>(
          static_cast<const T*>(d_dense), static_cast<const I*>(d_idx), n, nullptr, lay->row,
          static_cast<T*>(d_vals_out));
      return launched("gather rows");
    });
  });
}
