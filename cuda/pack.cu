// Fusion buffer pack and unpack with scaling (hvds_cuda.h), and the standalone scale.
//
// One launch moves up to kBatch tensors: their pointers, counts and offsets travel by value in
// the kernel's parameters (no descriptor copy to the device, no allocation), and each block owns
// one chunk of kChunk elements of one tensor, found by a binary search over the tensors' first
// blocks. Unscaled moves of 16-byte-aligned tensors are copied as 16-byte vectors.
#include "cuda_internal.cuh"

namespace hvds_cuda {
namespace {

constexpr int kBatch = 64;                // tensors per launch (parameters stay under 4 KiB)
constexpr size_t kChunk = 16 * kThreads;  // elements per block

struct Batch {
  int n;
  uint32_t first_block[kBatch + 1];  // block that starts tensor i; [n] = blocks in the launch
  char* data[kBatch];                // tensor i (NULL: zeros when packing, skipped unpacking)
  uint64_t count[kBatch];            // elements of tensor i
  uint64_t offset[kBatch];           // element offset of tensor i in the fused buffer
};

__device__ int find_tensor(const Batch& b, uint32_t block) {
  int lo = 0, hi = b.n - 1;  // the last i with first_block[i] <= block
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (b.first_block[mid] <= block)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// kPack: tensor -> fused; else fused -> tensor. kScale: multiply by f on the way.
template <class T, bool kPack, bool kScale>
__global__ void move_kernel(Batch b, char* fused, double f) {
  int t = find_tensor(b, blockIdx.x);
  size_t begin = (size_t)(blockIdx.x - b.first_block[t]) * kChunk;
  size_t end = begin + kChunk < b.count[t] ? begin + kChunk : b.count[t];
  T* tensor = reinterpret_cast<T*>(b.data[t]);
  T* flat = reinterpret_cast<T*>(fused) + b.offset[t];
  if (tensor == nullptr && !kPack) return;
  // Unscaled and 16-byte aligned: move 16-byte vectors.
  constexpr size_t kVec = 16 / sizeof(T);
  if (!kScale && kVec > 1 && tensor != nullptr &&
      ((reinterpret_cast<uintptr_t>(tensor) | reinterpret_cast<uintptr_t>(flat)) & 15) == 0) {
    const uint4* src = reinterpret_cast<const uint4*>(kPack ? tensor : flat) + begin / kVec;
    uint4* dst = reinterpret_cast<uint4*>(kPack ? flat : tensor) + begin / kVec;
    size_t vecs = (end - begin) / kVec;
    for (size_t i = threadIdx.x; i < vecs; i += blockDim.x) dst[i] = src[i];
    begin += vecs * kVec;  // the tail (end of a tensor) goes element by element
  }
  for (size_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    if (kPack) {
      T v = tensor != nullptr ? tensor[i] : T{};
      flat[i] = kScale ? hvds_elem::scale(v, f) : v;
    } else {
      tensor[i] = kScale ? hvds_elem::scale(flat[i], f) : flat[i];
    }
  }
}

template <class T, bool kPack>
hvds_result_t launch_batch(const Batch& b, char* fused, double f, cudaStream_t s) {
  if (b.n == 0 || b.first_block[b.n] == 0) return HVDS_SUCCESS;
  if (f == 1.0)
    move_kernel<T, kPack, false><<<b.first_block[b.n], kThreads, 0, s>>>(b, fused, f);
  else
    move_kernel<T, kPack, true><<<b.first_block[b.n], kThreads, 0, s>>>(b, fused, f);
  return launched(kPack ? "pack" : "unpack");
}

template <bool kPack>
hvds_result_t move_all(const hvds_cuda_buf_t* tensors, int n, char* fused, hvds_dtype_t dtype,
                       double f, cudaStream_t s) {
  if (n < 0 || (n > 0 && (tensors == nullptr || fused == nullptr))) return HVDS_INVALID_ARGUMENT;
  return dispatch(dtype, [&](auto tag) -> hvds_result_t {
    using T = decltype(tag);
    Batch b;
    b.n = 0;
    b.first_block[0] = 0;
    uint64_t offset = 0;
    for (int i = 0; i < n; i++) {
      size_t blocks = (tensors[i].count + kChunk - 1) / kChunk;
      // Flush when the batch is full or its grid would pass 2^31 - 1 blocks.
      if (b.n == kBatch || b.first_block[b.n] + blocks > 0x7fffffffu) {
        hvds_result_t rc = launch_batch<T, kPack>(b, fused, f, s);
        if (rc != HVDS_SUCCESS) return rc;
        b.n = 0;
        b.first_block[0] = 0;
      }
      if (blocks > 0x7fffffffu) return HVDS_INVALID_ARGUMENT;  // a single tensor of 2^43 elements
      b.data[b.n] = static_cast<char*>(tensors[i].data);
      b.count[b.n] = tensors[i].count;
      b.offset[b.n] = offset;
      b.first_block[b.n + 1] = b.first_block[b.n] + (uint32_t)blocks;
      b.n++;
      offset += tensors[i].count;
    }
    return launch_batch<T, kPack>(b, fused, f, s);
  });
}

template <class T>
__global__ void scale_kernel(T* buf, size_t n, double f) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    buf[i] = hvds_elem::scale(buf[i], f);
}

}  // namespace
}  // namespace hvds_cuda

using namespace hvds_cuda;

extern "C" int hvds__cuda_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

extern "C" hvds_result_t hvds__cuda_pack(const hvds_cuda_buf_t* tensors, int n, void* d_fused,
                                         hvds_dtype_t dtype, double factor,
                                         hvds_cuda_stream_t stream) {
  return move_all<true>(tensors, n, static_cast<char*>(d_fused), dtype, factor, as_stream(stream));
}

extern "C" hvds_result_t hvds__cuda_unpack(const void* d_fused, const hvds_cuda_buf_t* tensors,
                                           int n, hvds_dtype_t dtype, double factor,
                                           hvds_cuda_stream_t stream) {
  return move_all<false>(tensors, n, static_cast<char*>(const_cast<void*>(d_fused)), dtype, factor,
                         as_stream(stream));
}

extern "C" hvds_result_t hvds__cuda_scale(void* d_buf, size_t count, hvds_dtype_t dtype,
                                          double factor, hvds_cuda_stream_t stream) {
  return dispatch(dtype, [&](auto tag) -> hvds_result_t {
    using T = decltype(tag);
    if (factor == 1.0 || count == 0) return HVDS_SUCCESS;
    if (d_buf == nullptr) return HVDS_INVALID_ARGUMENT;
    scale_kernel<T><<<grid_for(count), kThreads, 0, as_stream(stream)>>>(static_cast<T*>(d_buf),
                                                                         count, factor);
    return launched("scale");
  });
}
