// Stochastic bucket quantization on the GPU (hvds_cuda.h): ops/quantize.c's encode and decode
// with the per-value arithmetic of cuda/quant_shared.h, so the encoded bytes are the CPU's.
//
// A thread owns 4 consecutive values, whose codes fill bits / 2 whole bytes, so no two threads
// write the same byte:
//   encode: one block per bucket of 1024 values (grid-stride over buckets). The values are
//   loaded as doubles, a block reduction gives max |v| (NaN when any value is NaN), thread 0
//   writes the float32 scale, then every thread writes its code bytes; block 0 also zeroes the
//   padding after the last code byte;
//   decode: a grid-stride loop over the groups of 4 values, each reading its bytes and its
//   bucket's scale.
// Bytes are read and written one at a time: the encoded block needs no alignment.
#include <cub/block/block_reduce.cuh>

#include "cuda_internal.cuh"
#include "quant_shared.h"
#include "quantize.h"

namespace hvds_cuda {
namespace {

constexpr size_t kBucket = HVDS_QUANT_BUCKET;
constexpr unsigned kQuantThreads = kBucket / 4;  // one thread per 4 values of a bucket

// Values as doubles and back, as ops/quantize.c's load() and store().
template <class T>
__device__ double load(const T* src, size_t i) {
  if constexpr (hvds_elem::is_half_v<T>)
    return (double)hvds_elem::to_float(src[i]);
  else
    return (double)src[i];
}

template <class T>
__device__ void store(double v, T* dst, size_t i) {
  if constexpr (hvds_elem::is_half_v<T>)
    dst[i] = hvds_elem::from_float<T>((float)v);
  else
    dst[i] = (T)v;
}

struct AbsMax {
  __device__ double operator()(double a, double b) const { return hvds_hd_quant_absmax(a, b); }
};

size_t buckets(size_t n) { return (n + kBucket - 1) / kBucket; }
__host__ __device__ size_t code_bytes(size_t n, int bits) { return (n * (size_t)bits + 7) / 8; }

template <class T>
__global__ void encode_kernel(const T* src, size_t n, int bits, uint64_t seed, unsigned char* dst,
                              size_t total) {
  using Reduce = cub::BlockReduce<double, kQuantThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  __shared__ float bucket_scale;
  int s = (1 << (bits - 1)) - 1;
  size_t nb = (n + kBucket - 1) / kBucket, end = nb * sizeof(float) + code_bytes(n, bits);
  for (size_t b = blockIdx.x; b < nb; b += gridDim.x) {
    size_t first = b * kBucket + 4 * (size_t)threadIdx.x;
    double v[4], mx = 0;
    for (int j = 0; j < 4; j++) {
      v[j] = first + j < n ? load(src, first + j) : 0.0;
      mx = hvds_hd_quant_absmax(mx, v[j]);
    }
    mx = Reduce(tmp).Reduce(mx, AbsMax());
    if (threadIdx.x == 0) {
      float scale = hvds_hd_quant_scale(mx);
      uint32_t bitsf = hvds_hd_f32_bits(scale);
      for (int k = 0; k < 4; k++) dst[b * sizeof(float) + k] = (unsigned char)(bitsf >> (8 * k));
      bucket_scale = scale;
    }
    __syncthreads();
    float scale = bucket_scale;
    double inv = hvds_hd_quant_inv(scale, s);
    uint32_t c[4];
    for (int j = 0; j < 4; j++)
      c[j] = first + j < n ? hvds_hd_quant_code(v[j], scale, s, inv, seed, first + j) : 0u;
    uint32_t group = hvds_hd_quant_pack4(c, bits);
    size_t at = nb * sizeof(float) + first * (size_t)bits / 8;
    for (int k = 0; k < bits / 2 && at + k < end; k++)
      dst[at + k] = (unsigned char)(group >> (8 * k));
    __syncthreads();  // tmp and bucket_scale are reused by the next bucket
  }
  if (blockIdx.x == 0 && threadIdx.x < 8 && end + threadIdx.x < total) dst[end + threadIdx.x] = 0;
}

template <class T>
__global__ void decode_kernel(const unsigned char* src, size_t n, int bits, T* dst) {
  int s = (1 << (bits - 1)) - 1;
  size_t nb = (n + kBucket - 1) / kBucket, end = nb * sizeof(float) + code_bytes(n, bits);
  size_t groups = (n + 3) / 4;
  for (size_t g = blockIdx.x * (size_t)blockDim.x + threadIdx.x; g < groups;
       g += (size_t)gridDim.x * blockDim.x) {
    size_t first = 4 * g, b = first / kBucket;
    uint32_t bitsf = 0, group = 0;
    for (int k = 0; k < 4; k++) bitsf |= (uint32_t)src[b * sizeof(float) + k] << (8 * k);
    float scale = hvds_hd_bits_f32(bitsf);
    size_t at = nb * sizeof(float) + first * (size_t)bits / 8;
    for (int k = 0; k < bits / 2 && at + k < end; k++) group |= (uint32_t)src[at + k] << (8 * k);
    for (int j = 0; j < 4 && first + j < n; j++)
      store(hvds_hd_quant_value(hvds_hd_quant_unpack(group, j, bits), s, scale), dst, first + j);
  }
}

// Calls f(T{}) for the four quantizable dtypes (hvds__quant_dtype_ok).
template <class F>
hvds_result_t dispatch_quant(hvds_dtype_t dtype, F&& f) {
  switch (dtype) {
    case HVDS_FLOAT16:
      return f(hvds_elem::f16{});
    case HVDS_BFLOAT16:
      return f(hvds_elem::bf16{});
    case HVDS_FLOAT32:
      return f(float{});
    case HVDS_FLOAT64:
      return f(double{});
    default:
      return HVDS_INVALID_ARGUMENT;
  }
}

}  // namespace
}  // namespace hvds_cuda

using namespace hvds_cuda;

extern "C" hvds_result_t hvds__cuda_quant_encode(const void* d_src, size_t n, hvds_dtype_t dtype,
                                                 int bits, uint64_t seed, void* d_dst,
                                                 hvds_cuda_stream_t stream) {
  if (hvds__quant_levels(bits) == 0 || !hvds__quant_dtype_ok(dtype)) return HVDS_INVALID_ARGUMENT;
  if (n == 0) return HVDS_SUCCESS;
  if (d_src == nullptr || d_dst == nullptr) return HVDS_INVALID_ARGUMENT;
  size_t nb = buckets(n);
  unsigned grid = (unsigned)(nb < kMaxBlocks ? nb : kMaxBlocks);
  size_t total = hvds__quant_bytes(n, bits);
  return dispatch_quant(dtype, [&](auto tag) -> hvds_result_t {
    using T = decltype(tag);
    encode_kernel<T><<<grid, kQuantThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(d_src), n, bits, seed, static_cast<unsigned char*>(d_dst), total);
    return launched("quant encode");
  });
}

extern "C" hvds_result_t hvds__cuda_quant_decode(const void* d_src, size_t n, int bits,
                                                 hvds_dtype_t dtype, void* d_dst,
                                                 hvds_cuda_stream_t stream) {
  if (hvds__quant_levels(bits) == 0 || !hvds__quant_dtype_ok(dtype)) return HVDS_INVALID_ARGUMENT;
  if (n == 0) return HVDS_SUCCESS;
  if (d_src == nullptr || d_dst == nullptr) return HVDS_INVALID_ARGUMENT;
  return dispatch_quant(dtype, [&](auto tag) -> hvds_result_t {
    using T = decltype(tag);
    decode_kernel<T><<<grid_for((n + 3) / 4), kThreads, 0, as_stream(stream)>>>(
        static_cast<const unsigned char*>(d_src), n, bits, static_cast<T*>(d_dst));
    return launched("quant decode");
  });
}
