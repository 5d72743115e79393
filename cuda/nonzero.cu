// Non-zero count and stream compaction (hvds_cuda.h): dense tensor -> sorted sparse entries.
//
// The dense rows are cut into tiles of kTile rows, one block per tile:
//   1. (row-sparse only) one warp per row marks rows with any non-zero value (flags);
//   2. each block counts its tile's non-zero rows;
//   3. an exclusive scan of the tile counts gives each tile's first output position;
//   4. each block walks its tile in rounds of kThreads rows, a block scan giving every non-zero
//      row its position, and writes the index (and, for COO, the value) there;
//   5. (row-sparse only) the rows are gathered by index.
// Output order is ascending index, the same on every run (no atomics decide positions).
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "cuda_internal.cuh"

namespace hvds_cuda {
namespace {

constexpr int kRounds = 8;
constexpr size_t kTile = (size_t)kRounds * kThreads;  // rows per tile

// Is row r non-zero? From the flags of step 1, or (COO) from the value itself.
template <class T>
struct Pred {
  const T* data;
  const uint8_t* flags;
  __device__ bool operator()(size_t r) const {
    return flags != nullptr ? flags[r] != 0 : hvds_elem::nonzero(data[r]);
  }
};

template <class T>
__global__ void row_flags_kernel(const T* data, size_t rows, size_t row, uint8_t* flags) {
  size_t lane = threadIdx.x & 31;
  size_t warp = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5;
  size_t warps = ((size_t)gridDim.x * blockDim.x) >> 5;
  for (size_t r = warp; r < rows; r += warps) {
    bool any = false;
    for (size_t j = lane; j < row && !any; j += 32) any = hvds_elem::nonzero(data[r * row + j]);
    any = __any_sync(0xffffffffu, any);
    if (lane == 0) flags[r] = any;
  }
}

template <class T>
__global__ void tile_count_kernel(Pred<T> pred, size_t rows, uint64_t* tile_counts,
                                  unsigned long long* total) {
  using Reduce = cub::BlockReduce<int, kThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  size_t start = (size_t)blockIdx.x * kTile;
  int mine = 0;
  for (int k = 0; k < kRounds; k++) {
    size_t r = start + (size_t)k * kThreads + threadIdx.x;
    mine += r < rows && pred(r);
  }
  int sum = Reduce(tmp).Sum(mine);
  if (threadIdx.x == 0) {
    if (tile_counts != nullptr) tile_counts[blockIdx.x] = (uint64_t)sum;
    if (total != nullptr) atomicAdd(total, (unsigned long long)sum);
  }
}

template <class T, class I>
__global__ void tile_scatter_kernel(Pred<T> pred, size_t rows, const uint64_t* tile_offs,
                                    size_t capacity, I* idx, T* vals, uint64_t* count) {
  using Scan = cub::BlockScan<int, kThreads>;
  __shared__ typename Scan::TempStorage tmp;
  size_t start = (size_t)blockIdx.x * kTile;
  uint64_t base = tile_offs[blockIdx.x];
  for (int k = 0; k < kRounds; k++) {
    size_t r = start + (size_t)k * kThreads + threadIdx.x;
    int f = r < rows && pred(r), before, round_total;
    Scan(tmp).ExclusiveSum(f, before, round_total);
    uint64_t pos = base + (uint64_t)before;
    if (f && pos < capacity) {
      idx[pos] = (I)r;
      if (vals != nullptr) vals[pos] = pred.data[r];  // COO: the value is the row
    }
    base += (uint64_t)round_total;
    __syncthreads();  // tmp is reused by the next round
  }
  if (blockIdx.x == gridDim.x - 1 && threadIdx.x == 0) *count = base;
}

// Workspace layout, shared by the query and the run.
struct Plan {
  uint8_t* flags;
  uint64_t* tile_counts;
  uint64_t* tile_offs;
  void* scan_tmp;
  size_t scan_bytes;
};

hvds_result_t plan(const hvds_sparse_layout_t* lay, Carve* c, Plan* p) {
  size_t tiles = (lay->dim + kTile - 1) / kTile;
  p->flags = lay->row > 1 ? c->take<uint8_t>(lay->dim) : nullptr;
  p->tile_counts = c->take<uint64_t>(tiles);
  p->tile_offs = c->take<uint64_t>(tiles);
  p->scan_bytes = 0;
  hvds_result_t rc = scan_u64(nullptr, nullptr, tiles, nullptr, &p->scan_bytes, 0);
  p->scan_tmp = c->take<char>(p->scan_bytes);
  return rc;
}

// Steps 1 and 2 (shared by count and compact).
template <class T>
hvds_result_t count_tiles(const hvds_sparse_layout_t* lay, const T* data, const Plan& p,
                          uint64_t* tile_counts, uint64_t* total, cudaStream_t s, Pred<T>* pred) {
  size_t tiles = (lay->dim + kTile - 1) / kTile;
  *pred = Pred<T>{data, nullptr};
  if (lay->row > 1) {
    row_flags_kernel<T>
        <<<grid_for(lay->dim * 32), kThreads, 0, s>>>(data, lay->dim, lay->row, p.flags);
    pred->flags = p.flags;
  }
  if (total != nullptr) HVDS_CUDA_CHECK(cudaMemsetAsync(total, 0, sizeof(uint64_t), s));
  tile_count_kernel<T><<<(unsigned)tiles, kThreads, 0, s>>>(
      *pred, lay->dim, tile_counts, reinterpret_cast<unsigned long long*>(total));
  return launched("nonzero count");
}

hvds_result_t check_args(const hvds_sparse_layout_t* lay, const void* d_dense, void* d_ws,
                         size_t ws_bytes, Plan* p) {
  hvds_result_t rc = check_layout(lay);
  if (rc != HVDS_SUCCESS) return rc;
  if (lay->dim > 0 && d_dense == nullptr) return HVDS_INVALID_ARGUMENT;
  if ((lay->dim + kTile - 1) / kTile > 0x7fffffffu) return HVDS_INVALID_ARGUMENT;
  Carve c{static_cast<char*>(d_ws), 0};
  rc = plan(lay, &c, p);
  if (rc != HVDS_SUCCESS) return rc;
  if (c.used > ws_bytes || (c.used > 0 && d_ws == nullptr)) {
    HVDS_WARN("cuda: nonzero: workspace of %zu bytes, %zu needed", ws_bytes, c.used);
    return HVDS_INVALID_ARGUMENT;
  }
  return HVDS_SUCCESS;
}

}  // namespace
}  // namespace hvds_cuda

using namespace hvds_cuda;

extern "C" size_t hvds__cuda_nonzero_workspace(const hvds_sparse_layout_t* lay) {
  Carve c{nullptr, 0};
  Plan p;
  if (lay == nullptr || plan(lay, &c, &p) != HVDS_SUCCESS) return 0;
  return c.used;
}

extern "C" hvds_result_t hvds__cuda_nonzero_count(const hvds_sparse_layout_t* lay,
                                                  const void* d_dense, uint64_t* d_count,
                                                  void* d_ws, size_t ws_bytes,
                                                  hvds_cuda_stream_t stream) {
  Plan p;
  hvds_result_t rc = check_args(lay, d_dense, d_ws, ws_bytes, &p);
  if (rc != HVDS_SUCCESS) return rc;
  if (d_count == nullptr) return HVDS_INVALID_ARGUMENT;
  cudaStream_t s = as_stream(stream);
  if (lay->dim == 0) {
    HVDS_CUDA_CHECK(cudaMemsetAsync(d_count, 0, sizeof(uint64_t), s));
    return HVDS_SUCCESS;
  }
  return dispatch(lay->dtype, [&](auto tag) -> hvds_result_t {
    using T = decltype(tag);
    Pred<T> pred;
    return count_tiles<T>(lay, static_cast<const T*>(d_dense), p, nullptr, d_count, s, &pred);
  });
}

extern "C" hvds_result_t hvds__cuda_nonzero_compact(const hvds_sparse_layout_t* lay,
                                                    const void* d_dense, size_t capacity,
                                                    void* d_indices, void* d_values,
                                                    uint64_t* d_count, void* d_ws, size_t ws_bytes,
                                                    hvds_cuda_stream_t stream) {
  Plan p;
  hvds_result_t rc = check_args(lay, d_dense, d_ws, ws_bytes, &p);
  if (rc != HVDS_SUCCESS) return rc;
  if (d_count == nullptr || (capacity > 0 && (d_indices == nullptr || d_values == nullptr)))
    return HVDS_INVALID_ARGUMENT;
  cudaStream_t s = as_stream(stream);
  if (lay->dim == 0) {
    HVDS_CUDA_CHECK(cudaMemsetAsync(d_count, 0, sizeof(uint64_t), s));
    return HVDS_SUCCESS;
  }
  size_t tiles = (lay->dim + kTile - 1) / kTile;
  return dispatch(lay->dtype, [&](auto tag) -> hvds_result_t {
    using T = decltype(tag);
    const T* data = static_cast<const T*>(d_dense);
    Pred<T> pred;
    HVDS_CHECK(count_tiles<T>(lay, data, p, p.tile_counts, nullptr, s, &pred));
    HVDS_CHECK(scan_u64(p.tile_counts, p.tile_offs, tiles, p.scan_tmp, &p.scan_bytes, s));
    return dispatch_index(lay->index_dtype, [&](auto itag) -> hvds_result_t {
      using I = decltype(itag);
      I* idx = static_cast<I*>(d_indices);
      T* vals = static_cast<T*>(d_values);
      tile_scatter_kernel<T, I><<<(unsigned)tiles, kThreads, 0, s>>>(
          pred, lay->dim, p.tile_offs, capacity, idx, lay->row == 1 ? vals : nullptr, d_count);
      if (lay->row > 1 && capacity > 0)
        gather_rows_kernel<T, I><<<grid_for(capacity * lay->row), kThreads, 0, s>>>(
            data, idx, capacity, d_count, lay->row, vals);
      return launched("nonzero compact");
    });
  });
}
