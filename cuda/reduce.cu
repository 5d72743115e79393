// Element-wise reduce and the 16-bit float casts (hvds_cuda.h): ops/reduce.c on the GPU, with
// the element arithmetic of elem_ops.h. Kernels are instantiated per (dtype, op) by the
// dispatch below (templates, not copies), only for the pairs ops/reduce.c supports.
#include "cuda_internal.cuh"

namespace hvds_cuda {
namespace {

template <int OP, class T>
__global__ void reduce_kernel(T* dst, const T* src, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    dst[i] = hvds_elem::combine<OP>(dst[i], src[i]);
}

// The kernel slot of op (ops/reduce.c's kernel_slot), or -1.
int op_slot(hvds_reduce_op_t op) {
  switch ((int)op) {
    case HVDS_SUM:
    case HVDS_AVERAGE:  // the caller scales by 1/size afterwards
      return hvds_elem::kSum;
    case HVDS_MIN:
      return hvds_elem::kMin;
    case HVDS_MAX:
      return hvds_elem::kMax;
    case HVDS_PRODUCT:
      return hvds_elem::kProd;
    case 100:  // HVDS_REDUCE_BAND (ops/reduce.h)
      return hvds_elem::kBand;
    case 101:  // HVDS_REDUCE_BOR
      return hvds_elem::kBor;
    default:
      return -1;
  }
}

template <int OP, class T>
hvds_result_t launch_reduce(void* dst, const void* src, size_t n, cudaStream_t s) {
  reduce_kernel<OP, T>
      <<<grid_for(n), kThreads, 0, s>>>(static_cast<T*>(dst), static_cast<const T*>(src), n);
  return launched("reduce");
}

// f32 <-> 16-bit float. H is f16 or bf16.
template <class H>
__global__ void widen_kernel(const H* src, float* dst, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    dst[i] = hvds_elem::to_float(src[i]);
}

template <class H>
__global__ void narrow_kernel(const float* src, H* dst, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    dst[i] = hvds_elem::from_float<H>(src[i]);
}

}  // namespace
}  // namespace hvds_cuda

using namespace hvds_cuda;

extern "C" hvds_result_t hvds__cuda_reduce(void* d_dst, const void* d_src, size_t count,
                                           hvds_dtype_t dtype, hvds_reduce_op_t op,
                                           hvds_cuda_stream_t stream) {
  int slot = op_slot(op);
  if (slot < 0) return HVDS_NOT_SUPPORTED;
  cudaStream_t s = as_stream(stream);
  return dispatch(dtype, [&](auto tag) -> hvds_result_t {
    using T = decltype(tag);
    constexpr bool kBits = std::is_integral<T>::value || std::is_same<T, hvds_elem::boolean>::value;
    if (!kBits && (slot == hvds_elem::kBand || slot == hvds_elem::kBor)) return HVDS_NOT_SUPPORTED;
    if (count == 0) return HVDS_SUCCESS;
    if (d_dst == nullptr || d_src == nullptr) return HVDS_INVALID_ARGUMENT;
    switch (slot) {
      case hvds_elem::kSum:
        return launch_reduce<hvds_elem::kSum, T>(d_dst, d_src, count, s);
      case hvds_elem::kMin:
        return launch_reduce<hvds_elem::kMin, T>(d_dst, d_src, count, s);
      case hvds_elem::kMax:
        return launch_reduce<hvds_elem::kMax, T>(d_dst, d_src, count, s);
      case hvds_elem::kProd:
        return launch_reduce<hvds_elem::kProd, T>(d_dst, d_src, count, s);
      default:
        if constexpr (kBits) {
          if (slot == hvds_elem::kBand)
            return launch_reduce<hvds_elem::kBand, T>(d_dst, d_src, count, s);
          return launch_reduce<hvds_elem::kBor, T>(d_dst, d_src, count, s);
        }
        return HVDS_NOT_SUPPORTED;
    }
  });
}

extern "C" hvds_result_t hvds__cuda_cast(const void* d_src, hvds_dtype_t src_dtype, void* d_dst,
                                         hvds_dtype_t dst_dtype, size_t count,
                                         hvds_cuda_stream_t stream) {
  auto is16 = [](hvds_dtype_t t) { return t == HVDS_FLOAT16 || t == HVDS_BFLOAT16; };
  bool ok = (src_dtype == HVDS_FLOAT32 && (is16(dst_dtype) || dst_dtype == HVDS_FLOAT32)) ||
            (is16(src_dtype) && (dst_dtype == HVDS_FLOAT32 || dst_dtype == src_dtype));
  if (!ok) return HVDS_NOT_SUPPORTED;
  if (count == 0) return HVDS_SUCCESS;
  if (d_src == nullptr || d_dst == nullptr) return HVDS_INVALID_ARGUMENT;
  cudaStream_t s = as_stream(stream);
  if (src_dtype == dst_dtype) {
    HVDS_CUDA_CHECK(cudaMemcpyAsync(d_dst, d_src, count * hvds__dtype_bytes(src_dtype),
                                    cudaMemcpyDeviceToDevice, s));
    return HVDS_SUCCESS;
  }
  unsigned g = grid_for(count);
  using hvds_elem::bf16;
  using hvds_elem::f16;
  if (src_dtype == HVDS_FLOAT16)
    widen_kernel<<<g, kThreads, 0, s>>>(static_cast<const f16*>(d_src), static_cast<float*>(d_dst),
                                        count);
  else if (src_dtype == HVDS_BFLOAT16)
    widen_kernel<<<g, kThreads, 0, s>>>(static_cast<const bf16*>(d_src), static_cast<float*>(d_dst),
                                        count);
  else if (dst_dtype == HVDS_FLOAT16)
    narrow_kernel<<<g, kThreads, 0, s>>>(static_cast<const float*>(d_src), static_cast<f16*>(d_dst),
                                         count);
  else
    narrow_kernel<<<g, kThreads, 0, s>>>(static_cast<const float*>(d_src),
                                         static_cast<bf16*>(d_dst), count);
  return launched("cast");
}
