// ZEN on the GPU (hvds_cuda.h): the push partition by counting sort, and the pull's bitmap
// encode and decode. The hash is ops/sparse/zen_hash_shared.h, the CPU's own.
//
// Partition (stable, so each block keeps input order as zen.c's does):
//   1. one warp per tile of kSteps * 32 entries hashes its entries, stores each owner, and
//      counts them per (owner, tile): lanes with the same owner find each other with
//      __match_any_sync and their lowest lane adds the group's size (no atomics: each (owner,
//      tile) counter belongs to one warp);
//   2. an exclusive scan of the counters, owner-major, gives each (owner, tile) its first output
//      position, and owner j's block start is that of (j, tile 0);
//   3. the same warps walk their tiles again in the same order: an entry's position is its
//      group's cursor plus its rank among the group's lower lanes.
// Tiles grow with P (kSteps >= P / 4) so the counters stay below n / 8 entries.
//
// Bitmap (zen.c's pull block: bit y - lo of hashed position y, LSB first; rows in hashed order):
//   encode: set bits with atomicOr on 32-bit words (on little-endian hardware bit k of word w is
//   bit k % 8 of byte 4w + k / 8, i.e. position 32w + k, so the words are the byte bitmap), scan
//   the words' popcounts, and an entry's row goes to (set bits before its bit);
//   decode: the same scan, then each word emits the inverse hash of its set bits in order.
#include "cuda_internal.cuh"
#include "zen_hash_shared.h"

namespace hvds_cuda {
namespace {

constexpr unsigned kWarpsPerBlock = 4;
constexpr uint64_t kDropped = UINT64_MAX;

// Steps of 32 entries per warp tile for P owners.
size_t tile_steps(int P) {
  size_t s = ((size_t)P + 3) / 4;
  return s < 32 ? 32 : s;
}

__device__ unsigned lanemask_lt() {
  unsigned m;
  asm("mov.u32 %0, %%lanemask_lt;" : "=r"(m));
  return m;
}

template <class I>
__global__ void zen_hist_kernel(hvds_zen_hash_t h, int P, const I* idx, size_t n, size_t steps,
                                size_t ntiles, uint32_t* owner, uint64_t* counts) {
  size_t w = blockIdx.x * (size_t)kWarpsPerBlock + threadIdx.x / 32;
  if (w >= ntiles) return;  // uniform per warp
  unsigned lane = threadIdx.x & 31;
  for (size_t k = 0; k < steps; k++) {
    size_t i = (w * steps + k) * 32 + lane;
    unsigned o = (unsigned)P;  // past the end or a bad index: a group of its own, dropped
    if (i < n) {
      uint64_t x = (uint64_t)idx[i];
      if (x < h.dim) o = (unsigned)hvds_hd_zen_owner(h.dim, P, hvds_hd_zen_hash(&h, x));
      owner[i] = o;
    }
    unsigned group = __match_any_sync(0xffffffffu, o);
    if (o < (unsigned)P && lane == (unsigned)(__ffs(group) - 1))
      counts[(size_t)o * ntiles + w] += (uint64_t)__popc(group);
    __syncwarp();  // the next step's leaders see these counts
  }
}

template <class I, class T>
__global__ void zen_scatter_kernel(int P, const I* idx, const T* vals, size_t n, size_t steps,
                                   size_t ntiles, const uint32_t* owner, uint64_t* cursor,
                                   I* idx_out, T* vals_out, uint64_t* perm) {
  size_t w = blockIdx.x * (size_t)kWarpsPerBlock + threadIdx.x / 32;
  if (w >= ntiles) return;
  unsigned lane = threadIdx.x & 31;
  for (size_t k = 0; k < steps; k++) {
    size_t i = (w * steps + k) * 32 + lane;
    unsigned o = i < n ? owner[i] : (unsigned)P;
    unsigned group = __match_any_sync(0xffffffffu, o);
    int leader = __ffs(group) - 1;
    uint64_t cur = 0;
    if (o < (unsigned)P && lane == (unsigned)leader) cur = cursor[(size_t)o * ntiles + w];
    cur = __shfl_sync(0xffffffffu, cur, leader);
    if (o < (unsigned)P) {
      uint64_t pos = cur + (uint64_t)__popc(group & lanemask_lt());
      idx_out[pos] = idx[i];
      if (perm != nullptr)
        perm[i] = pos;
      else
        vals_out[pos] = vals[i];
      if (lane == (unsigned)leader) cursor[(size_t)o * ntiles + w] = cur + (uint64_t)__popc(group);
    } else if (i < n && perm != nullptr) {
      perm[i] = kDropped;  // a bad index: move_rows skips its row
    }
    __syncwarp();
  }
}

// d_offsets[j] = start of owner j's block; d_offsets[P] = entries kept.
__global__ void block_starts_kernel(const uint64_t* offs, const uint64_t* counts, int P,
                                    size_t ntiles, uint64_t* d_offsets) {
  size_t last = (size_t)P * ntiles - 1;
  for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j <= (size_t)P;
       j += (size_t)gridDim.x * blockDim.x)
    d_offsets[j] = j < (size_t)P ? offs[j * ntiles] : offs[last] + counts[last];
}

struct PartPlan {
  size_t steps, ntiles;
  uint32_t* owner;
  uint64_t* counts;
  uint64_t* offs;
  uint64_t* perm;
  void* scan_tmp;
  size_t scan_bytes;
};

hvds_result_t part_plan(const hvds_sparse_layout_t* lay, size_t n, int P, Carve* c, PartPlan* p) {
  p->steps = tile_steps(P);
  p->ntiles = (n + p->steps * 32 - 1) / (p->steps * 32);
  p->owner = c->take<uint32_t>(n);
  p->counts = c->take<uint64_t>((size_t)P * p->ntiles);
  p->offs = c->take<uint64_t>((size_t)P * p->ntiles);
  p->perm = lay->row > 1 ? c->take<uint64_t>(n) : nullptr;
  p->scan_bytes = 0;
  hvds_result_t rc = scan_u64(nullptr, nullptr, (size_t)P * p->ntiles, nullptr, &p->scan_bytes, 0);
  p->scan_tmp = c->take<char>(p->scan_bytes);
  return rc;
}

// ---- Bitmap ----

template <class I>
__global__ void bitmap_set_kernel(hvds_zen_hash_t h, uint64_t lo, uint64_t len, const I* idx,
                                  size_t n, uint64_t* keys, unsigned* map) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    uint64_t x = (uint64_t)idx[i], key = kDropped;
    if (x < h.dim) {
      uint64_t y = hvds_hd_zen_hash(&h, x);
      if (y >= lo && y - lo < len) key = y - lo;
    }
    keys[i] = key;
    if (key != kDropped) atomicOr(&map[key >> 5], 1u << (key & 31));
  }
}

// Set bits per word, bits at or past len masked off.
__global__ void word_count_kernel(const unsigned* map, size_t words, uint64_t len, uint64_t* wc) {
  for (size_t w = blockIdx.x * (size_t)blockDim.x + threadIdx.x; w < words;
       w += (size_t)gridDim.x * blockDim.x) {
    unsigned bits = map[w];
    uint64_t first = (uint64_t)w * 32;
    if (first >= len)
      bits = 0;
    else if (len - first < 32)
      bits &= (1u << (len - first)) - 1;
    wc[w] = (uint64_t)__popc(bits);
  }
}

template <class T>
__global__ void bitmap_place_kernel(const uint64_t* keys, size_t n, const unsigned* map,
                                    const uint64_t* wpre, const T* vals, T* vals_out,
                                    uint64_t* perm) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    uint64_t key = keys[i], pos = kDropped;
    if (key != kDropped)
      pos = wpre[key >> 5] + (uint64_t)__popc(map[key >> 5] & ((1u << (key & 31)) - 1));
    if (perm != nullptr)
      perm[i] = pos;
    else if (pos != kDropped)
      vals_out[pos] = vals[i];
  }
}

template <class I>
__global__ void bitmap_decode_kernel(hvds_zen_hash_t h, uint64_t lo, uint64_t len,
                                     const unsigned* map, size_t words, const uint64_t* wpre,
                                     size_t n, I* idx_out, uint64_t* keys) {
  for (size_t w = blockIdx.x * (size_t)blockDim.x + threadIdx.x; w < words;
       w += (size_t)gridDim.x * blockDim.x) {
    unsigned bits = map[w];
    uint64_t first = (uint64_t)w * 32;
    if (first >= len)
      bits = 0;
    else if (len - first < 32)
      bits &= (1u << (len - first)) - 1;
    for (uint64_t t = wpre[w]; bits != 0 && t < n; bits &= bits - 1, t++) {
      uint64_t x = hvds_hd_zen_hash_inv(&h, lo + first + (uint64_t)(__ffs(bits) - 1));
      if (idx_out != nullptr) idx_out[t] = (I)x;
      keys[t] = x;
    }
  }
}

// Rows i < min(n, set bits) of vals to rows keys[i] of dense; the set bits are the scan's last
// prefix plus the last word's count.
template <class T>
__global__ void scatter_by_key_kernel(const uint64_t* keys, const T* vals, size_t n,
                                      const uint64_t* wpre_last, const uint64_t* wc_last,
                                      size_t row, T* dense) {
  uint64_t bits = *wpre_last + *wc_last;
  size_t total = (n < bits ? n : (size_t)bits) * row;
  for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < total;
       k += (size_t)gridDim.x * blockDim.x) {
    size_t i = k / row, j = k - i * row;
    dense[keys[i] * row + j] = vals[k];
  }
}

struct MapPlan {
  size_t words;
  uint64_t* keys;
  uint64_t* wc;
  uint64_t* wpre;
  uint64_t* perm;
  void* scan_tmp;
  size_t scan_bytes;
};

hvds_result_t map_plan(const hvds_sparse_layout_t* lay, uint64_t len, size_t n, Carve* c,
                       MapPlan* p) {
  p->words = hvds__cuda_bitmap_bytes(len) / 4;
  p->keys = c->take<uint64_t>(n);
  p->wc = c->take<uint64_t>(p->words);
  p->wpre = c->take<uint64_t>(p->words);
  p->perm = lay->row > 1 ? c->take<uint64_t>(n) : nullptr;
  p->scan_bytes = 0;
  hvds_result_t rc = scan_u64(nullptr, nullptr, p->words, nullptr, &p->scan_bytes, 0);
  p->scan_tmp = c->take<char>(p->scan_bytes);
  return rc;
}

// Lays out the workspace and checks its size and the common arguments.
template <class Plan, class Fn>
hvds_result_t carve_checked(const char* what, void* d_ws, size_t ws_bytes, Plan* p, Fn&& plan) {
  Carve c{static_cast<char*>(d_ws), 0};
  hvds_result_t rc = plan(&c, p);
  if (rc != HVDS_SUCCESS) return rc;
  if (c.used > ws_bytes || d_ws == nullptr) {
    HVDS_WARN("cuda: %s: workspace of %zu bytes at %p, %zu needed", what, ws_bytes, d_ws, c.used);
    return HVDS_INVALID_ARGUMENT;
  }
  return HVDS_SUCCESS;
}

hvds_result_t check_hash(const hvds_zen_hash_t* h, const hvds_sparse_layout_t* lay) {
  if (h == nullptr || h->dim != (uint64_t)lay->dim) {
    HVDS_WARN("cuda: zen: the hash was not initialized for dim %zu", lay->dim);
    return HVDS_INVALID_ARGUMENT;
  }
  return HVDS_SUCCESS;
}

}  // namespace
}  // namespace hvds_cuda

using namespace hvds_cuda;

extern "C" size_t hvds__cuda_zen_partition_workspace(const hvds_sparse_layout_t* lay, size_t n,
                                                     int P) {
  if (lay == nullptr || P < 1) return 0;
  Carve c{nullptr, 0};
  PartPlan p;
  return part_plan(lay, n, P, &c, &p) == HVDS_SUCCESS ? c.used : 0;
}

extern "C" hvds_result_t hvds__cuda_zen_partition(const hvds_zen_hash_t* h, int P,
                                                  const hvds_sparse_layout_t* lay,
                                                  const void* d_idx, const void* d_vals, size_t n,
                                                  void* d_idx_out, void* d_vals_out,
                                                  uint64_t* d_offsets, void* d_ws, size_t ws_bytes,
                                                  hvds_cuda_stream_t stream) {
  HVDS_CHECK(check_layout(lay));
  HVDS_CHECK(check_hash(h, lay));
  if (P < 1 || d_offsets == nullptr) return HVDS_INVALID_ARGUMENT;
  if (n > 0 &&
      (d_idx == nullptr || d_vals == nullptr || d_idx_out == nullptr || d_vals_out == nullptr))
    return HVDS_INVALID_ARGUMENT;
  PartPlan p;
  HVDS_CHECK(carve_checked("zen partition", d_ws, ws_bytes, &p,
                           [&](Carve* c, PartPlan* q) { return part_plan(lay, n, P, c, q); }));
  if ((size_t)P * p.ntiles > 0x7fffffff) return HVDS_INVALID_ARGUMENT;
  cudaStream_t s = as_stream(stream);
  if (n == 0) {
    HVDS_CUDA_CHECK(cudaMemsetAsync(d_offsets, 0, ((size_t)P + 1) * sizeof(uint64_t), s));
    return HVDS_SUCCESS;
  }
  unsigned blocks = (unsigned)((p.ntiles + kWarpsPerBlock - 1) / kWarpsPerBlock);
  return dispatch_index(lay->index_dtype, [&](auto itag) -> hvds_result_t {
    using I = decltype(itag);
    const I* idx = static_cast<const I*>(d_idx);
    HVDS_CUDA_CHECK(cudaMemsetAsync(p.counts, 0, (size_t)P * p.ntiles * sizeof(uint64_t), s));
    zen_hist_kernel<I><<<blocks, kWarpsPerBlock * 32, 0, s>>>(*h, P, idx, n, p.steps, p.ntiles,
                                                              p.owner, p.counts);
    HVDS_CHECK(launched("zen partition"));
    HVDS_CHECK(scan_u64(p.counts, p.offs, (size_t)P * p.ntiles, p.scan_tmp, &p.scan_bytes, s));
    block_starts_kernel<<<grid_for((size_t)P + 1), kThreads, 0, s>>>(p.offs, p.counts, P, p.ntiles,
                                                                     d_offsets);
    return dispatch(lay->dtype, [&](auto tag) -> hvds_result_t {
      using T = decltype(tag);
      const T* vals = static_cast<const T*>(d_vals);
      T* vals_out = static_cast<T*>(d_vals_out);
      zen_scatter_kernel<I, T><<<blocks, kWarpsPerBlock * 32, 0, s>>>(
          P, idx, lay->row == 1 ? vals : nullptr, n, p.steps, p.ntiles, p.owner, p.offs,
          static_cast<I*>(d_idx_out), vals_out, p.perm);
      if (p.perm != nullptr)
        move_rows<T><<<grid_for(n * lay->row), kThreads, 0, s>>>(vals, p.perm, n, nullptr, lay->row,
                                                                 vals_out);
      return launched("zen partition");
    });
  });
}

extern "C" size_t hvds__cuda_bitmap_bytes(size_t len) { return hvds__pad8((len + 7) / 8); }

extern "C" size_t hvds__cuda_bitmap_workspace(const hvds_sparse_layout_t* lay, size_t len,
                                              size_t n) {
  if (lay == nullptr) return 0;
  Carve c{nullptr, 0};
  MapPlan p;
  return map_plan(lay, len, n, &c, &p) == HVDS_SUCCESS ? c.used : 0;
}

extern "C" hvds_result_t hvds__cuda_bitmap_encode(const hvds_zen_hash_t* h,
                                                  const hvds_sparse_layout_t* lay, uint64_t lo,
                                                  uint64_t len, const void* d_idx,
                                                  const void* d_vals, size_t n, void* d_map,
                                                  void* d_vals_out, void* d_ws, size_t ws_bytes,
                                                  hvds_cuda_stream_t stream) {
  HVDS_CHECK(check_layout(lay));
  HVDS_CHECK(check_hash(h, lay));
  if (lo > lay->dim || len > lay->dim - lo || (len > 0 && d_map == nullptr) ||
      (reinterpret_cast<uintptr_t>(d_map) & 3) != 0)
    return HVDS_INVALID_ARGUMENT;
  if (n > 0 && (d_idx == nullptr || d_vals == nullptr || d_vals_out == nullptr))
    return HVDS_INVALID_ARGUMENT;
  MapPlan p;
  HVDS_CHECK(carve_checked("bitmap encode", d_ws, ws_bytes, &p,
                           [&](Carve* c, MapPlan* q) { return map_plan(lay, len, n, c, q); }));
  cudaStream_t s = as_stream(stream);
  if (len == 0) return HVDS_SUCCESS;
  unsigned* map = static_cast<unsigned*>(d_map);
  HVDS_CUDA_CHECK(cudaMemsetAsync(d_map, 0, hvds__cuda_bitmap_bytes(len), s));
  if (n == 0) return HVDS_SUCCESS;
  return dispatch_index(lay->index_dtype, [&](auto itag) -> hvds_result_t {
    using I = decltype(itag);
    bitmap_set_kernel<I><<<grid_for(n), kThreads, 0, s>>>(*h, lo, len, static_cast<const I*>(d_idx),
                                                          n, p.keys, map);
    word_count_kernel<<<grid_for(p.words), kThreads, 0, s>>>(map, p.words, len, p.wc);
    HVDS_CHECK(launched("bitmap encode"));
    HVDS_CHECK(scan_u64(p.wc, p.wpre, p.words, p.scan_tmp, &p.scan_bytes, s));
    return dispatch(lay->dtype, [&](auto tag) -> hvds_result_t {
      using T = decltype(tag);
      const T* vals = static_cast<const T*>(d_vals);
      T* vals_out = static_cast<T*>(d_vals_out);
      bitmap_place_kernel<T>
          <<<grid_for(n), kThreads, 0, s>>>(p.keys, n, map, p.wpre, vals, vals_out, p.perm);
      if (p.perm != nullptr)
        move_rows<T><<<grid_for(n * lay->row), kThreads, 0, s>>>(vals, p.perm, n, nullptr, lay->row,
                                                                 vals_out);
      return launched("bitmap encode");
    });
  });
}

extern "C" hvds_result_t hvds__cuda_bitmap_decode(const hvds_zen_hash_t* h,
                                                  const hvds_sparse_layout_t* lay, uint64_t lo,
                                                  uint64_t len, const void* d_map,
                                                  const void* d_vals, size_t n, void* d_idx_out,
                                                  void* d_dense, void* d_ws, size_t ws_bytes,
                                                  hvds_cuda_stream_t stream) {
  HVDS_CHECK(check_layout(lay));
  HVDS_CHECK(check_hash(h, lay));
  if (lo > lay->dim || len > lay->dim - lo || (len > 0 && d_map == nullptr) ||
      (reinterpret_cast<uintptr_t>(d_map) & 3) != 0)
    return HVDS_INVALID_ARGUMENT;
  if (n > 0 && d_dense != nullptr && d_vals == nullptr) return HVDS_INVALID_ARGUMENT;
  MapPlan p;
  HVDS_CHECK(carve_checked("bitmap decode", d_ws, ws_bytes, &p,
                           [&](Carve* c, MapPlan* q) { return map_plan(lay, len, n, c, q); }));
  if (len == 0 || n == 0) return HVDS_SUCCESS;
  cudaStream_t s = as_stream(stream);
  const unsigned* map = static_cast<const unsigned*>(d_map);
  return dispatch_index(lay->index_dtype, [&](auto itag) -> hvds_result_t {
    using I = decltype(itag);
    word_count_kernel<<<grid_for(p.words), kThreads, 0, s>>>(map, p.words, len, p.wc);
    HVDS_CHECK(launched("bitmap decode"));
    HVDS_CHECK(scan_u64(p.wc, p.wpre, p.words, p.scan_tmp, &p.scan_bytes, s));
    bitmap_decode_kernel<I><<<grid_for(p.words), kThreads, 0, s>>>(
        *h, lo, len, map, p.words, p.wpre, n, static_cast<I*>(d_idx_out), p.keys);
    if (d_dense == nullptr) return launched("bitmap decode");
    return dispatch(lay->dtype, [&](auto tag) -> hvds_result_t {
      using T = decltype(tag);
      scatter_by_key_kernel<T><<<grid_for(n * lay->row), kThreads, 0, s>>>(
          p.keys, static_cast<const T*>(d_vals), n, p.wpre + p.words - 1, p.wc + p.words - 1,
          lay->row, static_cast<T*>(d_dense));
      return launched("bitmap decode");
    });
  });
}
