// Top-k with error feedback on the GPU (hvds_cuda.h): ops/topk.c's exact selection (a plan
// without a sample), with its keys, tie rule and output order (cuda/topk_shared.h).
//
//   1. radix selection of the k-th largest key, 11 bits per pass from the top (3 passes for
//      float32, 6 for float64, as ops/topk.c): a pass counts the next digit of the keys that
//      match the digits fixed so far (per-block shared-memory bins added into one histogram),
//      then one block scans the histogram from the top, fixes the digit where the count reaches
//      k - above, and clears the histogram. The first pass also adds grad into acc;
//   2. each tile of kTile entries counts its keys above the k-th and its ties; exclusive scans
//      of the two counts give every tile the counts of the tiles before it;
//   3. each tile walks its entries in rounds of kThreads, a block scan giving every entry the
//      counts before it: an entry above the k-th, or one of the first k - above ties, goes to
//      its slot (hvds_hd_topk_slot: increasing index order) and is zeroed in acc.
// The selection's state stays in the workspace, so nothing waits for the host.
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "cuda_internal.cuh"
#include "topk_shared.h"

namespace hvds_cuda {
namespace {

constexpr int kDigitBits = 11;
constexpr int kBuckets = 1 << kDigitBits;
constexpr int kPerThread = kBuckets / (int)kThreads;  // histogram buckets per descend thread
constexpr unsigned kHistBlocks = 512;                 // at most this many blocks count a digit
constexpr int kRounds = 8;
constexpr size_t kTile = (size_t)kRounds * kThreads;  // entries per tile of steps 2 and 3
// Steps 2 and 3 count above-the-k-th in the low half of an unsigned and ties in the high half
// (a tile has fewer than 2^16 entries).
constexpr unsigned kTieUnit = 1u << 16;

__device__ __forceinline__ uint64_t key_of(float v) { return hvds_hd_topk_key_f32(v); }
__device__ __forceinline__ uint64_t key_of(double v) { return hvds_hd_topk_key_f64(v); }

template <class T>
constexpr int key_bits() {
  return sizeof(T) == 4 ? 31 : 63;
}

__device__ __forceinline__ unsigned flags_of(uint64_t key, uint64_t kth) {
  return hvds_hd_topk_above(key, kth) ? 1u : hvds_hd_topk_tie(key, kth) ? kTieUnit : 0u;
}

// Step 1, one digit: hist[d] += the matching keys whose digit at `shift` is d. kAdd (the first
// pass): acc += grad on the way.
template <class T, bool kAdd>
__global__ void hist_kernel(T* acc, const T* grad, size_t n, int shift, int width,
                            const hvds_hd_topk_sel_t* sel, unsigned long long* hist) {
  __shared__ unsigned bins[kBuckets];
  for (int b = threadIdx.x; b < kBuckets; b += blockDim.x) bins[b] = 0;
  __syncthreads();
  hvds_hd_topk_sel_t s = *sel;
  uint64_t digit = ((uint64_t)1 << width) - 1;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    T v = acc[i];
    if (kAdd) {
      v += grad[i];
      acc[i] = v;
    }
    uint64_t key = key_of(v);
    if (hvds_hd_topk_matches(&s, key)) atomicAdd(&bins[(key >> shift) & digit], 1u);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < kBuckets; b += blockDim.x)
    if (bins[b] != 0) atomicAdd(&hist[b], (unsigned long long)bins[b]);
}

// Step 1, fixing the digit: thread t owns kPerThread buckets counted down from the top, a block
// scan gives each its `seen`, and the thread holding the crossing bucket updates the state. The
// last pass also writes the number selected: k, or every non-zero when fewer than k are.
__global__ void descend_kernel(unsigned long long* hist, int shift, int width, uint64_t k,
                               hvds_hd_topk_sel_t* sel, uint64_t* count) {
  using Scan = cub::BlockScan<unsigned long long, kThreads>;
  __shared__ typename Scan::TempStorage tmp;
  int top = (1 << width) - 1;
  hvds_hd_topk_sel_t st = *sel;  // read by every thread before the scan's barriers
  uint64_t need = k - st.above;
  unsigned long long h[kPerThread], mine = 0, seen;
  for (int j = 0; j < kPerThread; j++) {
    int b = top - ((int)threadIdx.x * kPerThread + j);
    h[j] = b >= 0 ? hist[b] : 0;
    mine += h[j];
  }
  Scan(tmp).ExclusiveSum(mine, seen);
  for (int j = 0; j < kPerThread; j++) {
    int b = top - ((int)threadIdx.x * kPerThread + j);
    if (b < 0) break;
    if (hvds_hd_topk_crosses(seen, h[j], need, (uint32_t)b)) {  // one thread, one bucket
      hvds_hd_topk_descend(&st, (uint32_t)b, shift, width, seen);
      *sel = st;
      if (count != nullptr) *count = st.prefix != 0 ? k : st.above;
    }
    seen += h[j];
    hist[b] = 0;  // clean for the next pass
  }
}

// Step 2: per tile, keys above the k-th and ties.
template <class T>
__global__ void tile_count_kernel(const T* acc, size_t n, const hvds_hd_topk_sel_t* sel,
                                  uint64_t* tile_gt, uint64_t* tile_tie) {
  using Reduce = cub::BlockReduce<unsigned, kThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  uint64_t kth = sel->prefix;
  size_t start = (size_t)blockIdx.x * kTile;
  unsigned mine = 0;
  for (int r = 0; r < kRounds; r++) {
    size_t i = start + (size_t)r * kThreads + threadIdx.x;
    if (i < n) mine += flags_of(key_of(acc[i]), kth);
  }
  unsigned sum = Reduce(tmp).Sum(mine);
  if (threadIdx.x == 0) {
    tile_gt[blockIdx.x] = sum % kTieUnit;
    tile_tie[blockIdx.x] = sum / kTieUnit;
  }
}

// Step 3: the selected entries to their slots, zeroed in acc. offs_*: the scanned tile counts.
template <class T, class I>
__global__ void take_kernel(T* acc, size_t n, const hvds_hd_topk_sel_t* sel, uint64_t k,
                            const uint64_t* offs_gt, const uint64_t* offs_tie, I* idx, T* vals) {
  using Scan = cub::BlockScan<unsigned, kThreads>;
  __shared__ typename Scan::TempStorage tmp;
  uint64_t kth = sel->prefix, ties = k - sel->above;
  uint64_t gt = offs_gt[blockIdx.x], tie = offs_tie[blockIdx.x];
  size_t start = (size_t)blockIdx.x * kTile;
  for (int r = 0; r < kRounds; r++) {
    size_t i = start + (size_t)r * kThreads + threadIdx.x;
    T v = i < n ? acc[i] : T(0);
    uint64_t key = key_of(v);
    unsigned f = i < n ? flags_of(key, kth) : 0u, before, total;
    Scan(tmp).ExclusiveSum(f, before, total);
    if (f != 0) {
      int64_t slot =
          hvds_hd_topk_slot(key, kth, ties, gt + before % kTieUnit, tie + before / kTieUnit);
      if (slot >= 0) {
        idx[slot] = (I)i;
        vals[slot] = v;
        acc[i] = T(0);
      }
    }
    gt += total % kTieUnit;
    tie += total / kTieUnit;
    __syncthreads();  // tmp is reused by the next round
  }
}

template <class T>
__global__ void add_kernel(T* acc, const T* grad, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    acc[i] += grad[i];
}

// Workspace layout, shared by the query and the run.
struct Plan {
  unsigned long long* hist;
  hvds_hd_topk_sel_t* sel;
  uint64_t* tile_gt;  // counts, then (scanned in place) the offsets
  uint64_t* tile_tie;
  void* scan_tmp;
  size_t scan_bytes;
};

hvds_result_t plan(size_t n, Carve* c, Plan* p) {
  size_t tiles = (n + kTile - 1) / kTile;
  p->hist = c->take<unsigned long long>(kBuckets);
  p->sel = c->take<hvds_hd_topk_sel_t>(1);
  p->tile_gt = c->take<uint64_t>(tiles);
  p->tile_tie = c->take<uint64_t>(tiles);
  p->scan_bytes = 0;
  hvds_result_t rc = scan_u64(nullptr, nullptr, tiles, nullptr, &p->scan_bytes, 0);
  p->scan_tmp = c->take<char>(p->scan_bytes);
  return rc;
}

template <class T>
hvds_result_t select_kth(T* acc, const T* grad, size_t n, uint64_t k, const Plan& p,
                         uint64_t* d_count, cudaStream_t s) {
  HVDS_CUDA_CHECK(cudaMemsetAsync(p.hist, 0, kBuckets * sizeof(unsigned long long), s));
  HVDS_CUDA_CHECK(cudaMemsetAsync(p.sel, 0, sizeof(hvds_hd_topk_sel_t), s));
  size_t blocks = (n + (size_t)kThreads * 16 - 1) / ((size_t)kThreads * 16);
  unsigned grid = (unsigned)(blocks < kHistBlocks ? (blocks > 0 ? blocks : 1) : kHistBlocks);
  bool first = true;
  for (int shift = key_bits<T>(); shift > 0; first = false) {
    int width = shift >= kDigitBits ? kDigitBits : shift;
    shift -= width;
    if (first && grad != nullptr)
      hist_kernel<T, true><<<grid, kThreads, 0, s>>>(acc, grad, n, shift, width, p.sel, p.hist);
    else
      hist_kernel<T, false><<<grid, kThreads, 0, s>>>(acc, grad, n, shift, width, p.sel, p.hist);
    descend_kernel<<<1, kThreads, 0, s>>>(p.hist, shift, width, k, p.sel,
                                          shift == 0 ? d_count : nullptr);
  }
  return launched("topk select");
}

template <class T, class I>
hvds_result_t take(T* acc, size_t n, uint64_t k, I* idx, T* vals, Plan& p, cudaStream_t s) {
  size_t tiles = (n + kTile - 1) / kTile;
  tile_count_kernel<T><<<(unsigned)tiles, kThreads, 0, s>>>(acc, n, p.sel, p.tile_gt, p.tile_tie);
  HVDS_CHECK(launched("topk count"));
  HVDS_CHECK(scan_u64(p.tile_gt, p.tile_gt, tiles, p.scan_tmp, &p.scan_bytes, s));
  HVDS_CHECK(scan_u64(p.tile_tie, p.tile_tie, tiles, p.scan_tmp, &p.scan_bytes, s));
  take_kernel<T, I>
      <<<(unsigned)tiles, kThreads, 0, s>>>(acc, n, p.sel, k, p.tile_gt, p.tile_tie, idx, vals);
  return launched("topk take");
}

hvds_result_t check_args(void* acc, hvds_dtype_t dtype, size_t n, size_t k, void* indices,
                         hvds_dtype_t index_dtype, void* values, uint64_t* count, void* ws,
                         size_t ws_bytes, Plan* p) {
  if (dtype != HVDS_FLOAT32 && dtype != HVDS_FLOAT64) return HVDS_NOT_SUPPORTED;
  if (index_dtype != HVDS_INT32 && index_dtype != HVDS_INT64) return HVDS_INVALID_ARGUMENT;
  if (index_dtype == HVDS_INT32 && n > (size_t)INT32_MAX) return HVDS_INVALID_ARGUMENT;
  if (count == nullptr || (n > 0 && acc == nullptr)) return HVDS_INVALID_ARGUMENT;
  if (n > 0 && k > 0 && (indices == nullptr || values == nullptr)) return HVDS_INVALID_ARGUMENT;
  if ((n + kTile - 1) / kTile > 0x7fffffffu) return HVDS_INVALID_ARGUMENT;
  Carve c{static_cast<char*>(ws), 0};
  hvds_result_t rc = plan(n, &c, p);
  if (rc != HVDS_SUCCESS) return rc;
  if (c.used > ws_bytes || ws == nullptr) {
    HVDS_WARN("cuda: topk: workspace of %zu bytes, %zu needed", ws_bytes, c.used);
    return HVDS_INVALID_ARGUMENT;
  }
  return HVDS_SUCCESS;
}

}  // namespace
}  // namespace hvds_cuda

using namespace hvds_cuda;

extern "C" size_t hvds__cuda_topk_workspace(size_t n) {
  Carve c{nullptr, 0};
  Plan p;
  if (plan(n, &c, &p) != HVDS_SUCCESS) return 0;
  return c.used;
}

extern "C" hvds_result_t hvds__cuda_topk_feedback(void* d_acc, const void* d_grad,
                                                  hvds_dtype_t dtype, size_t n, size_t k,
                                                  void* d_indices, hvds_dtype_t index_dtype,
                                                  void* d_values, uint64_t* d_count, void* d_ws,
                                                  size_t ws_bytes, hvds_cuda_stream_t stream) {
  Plan p;
  hvds_result_t rc =
      check_args(d_acc, dtype, n, k, d_indices, index_dtype, d_values, d_count, d_ws, ws_bytes, &p);
  if (rc != HVDS_SUCCESS) return rc;
  cudaStream_t s = as_stream(stream);
  if (k > n) k = n;
  auto run = [&](auto tag) -> hvds_result_t {
    using T = decltype(tag);
    T* acc = static_cast<T*>(d_acc);
    const T* grad = static_cast<const T*>(d_grad);
    if (k == 0) {  // nothing to select: the gradient is still accumulated
      HVDS_CUDA_CHECK(cudaMemsetAsync(d_count, 0, sizeof(uint64_t), s));
      if (n == 0 || grad == nullptr) return HVDS_SUCCESS;
      add_kernel<T><<<grid_for(n), kThreads, 0, s>>>(acc, grad, n);
      return launched("topk add");
    }
    HVDS_CHECK(select_kth<T>(acc, grad, n, k, p, d_count, s));
    return dispatch_index(index_dtype, [&](auto itag) -> hvds_result_t {
      using I = decltype(itag);
      return take<T, I>(acc, n, k, static_cast<I*>(d_indices), static_cast<T*>(d_values), p, s);
    });
  };
  return dtype == HVDS_FLOAT32 ? run(float{}) : run(double{});
}
