// Allreduce bus bandwidth of our path (hvds__nccl_allreduce: the context's stream, completion
// event and completion thread) next to ncclAllReduce called directly on the same buffers, with
// one rank (thread) per GPU. Bus bandwidth is nccl-tests': algbw * 2 (n - 1) / n, which is 0 at
// one rank, so algbw and the time per call are printed too. Out of place, so that one rank still
// moves every byte (NCCL's in-place allreduce at one rank does nothing): the bound there is the
// device's copy rate. Usage: nccl_allreduce_bench [max MiB] [iterations].
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "nccl_backend.h"

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The unique id of our communicators goes through this in-process "control plane".
struct Shared {
  explicit Shared(int n) : sync(n) {}
  std::barrier<> sync;
  char id[256];
  std::vector<ncclComm_t> raw;
  std::vector<double> ours, direct;  // seconds per iteration, rank 0's
};

struct BcastCtx {
  Shared* sh;
  int rank;
};

hvds_result_t bcast(void* c, void* buf, size_t bytes, int root) {
  BcastCtx* b = static_cast<BcastCtx*>(c);
  if (b->rank == root) memcpy(b->sh->id, buf, bytes);
  b->sh->sync.arrive_and_wait();
  if (b->rank != root) memcpy(buf, b->sh->id, bytes);
  b->sh->sync.arrive_and_wait();
  return HVDS_SUCCESS;
}

void rank_main(Shared* sh, int rank, int n, const std::vector<size_t>& sizes, int iters) {
  cudaSetDevice(rank);
  hvds_nccl_ctx_t* ctx = nullptr;
  hvds_nccl_comm_t* comm = nullptr;
  BcastCtx bc{sh, rank};
  if (hvds__nccl_ctx_create(rank, 0, &ctx) != HVDS_SUCCESS ||
      hvds__nccl_comm_create(ctx, rank, n, bcast, &bc, &comm) != HVDS_SUCCESS) {
    fprintf(stderr, "rank %d: backend setup failed\n", rank);
    exit(1);
  }
  cudaStream_t s = (cudaStream_t)hvds__nccl_ctx_stream(ctx);
  void *buf = nullptr, *out = nullptr;
  if (cudaMalloc(&buf, sizes.back()) != cudaSuccess || cudaMalloc(&out, sizes.back()) != cudaSuccess) {
    fprintf(stderr, "rank %d: cudaMalloc of %zu bytes failed\n", rank, sizes.back());
    exit(1);
  }
  cudaMemset(buf, 0, sizes.back());
  cudaMemset(out, 0, sizes.back());
  for (size_t bytes : sizes) {
    size_t count = bytes / 4;
    for (int pass = 0; pass < 2; pass++) {  // 0: ours, 1: ncclAllReduce
      auto once = [&] {
        if (pass == 0) {
          hvds_nccl_call_t c = HVDS_NCCL_CALL_INIT;
          hvds__nccl_allreduce(comm, buf, out, count, HVDS_FLOAT32, HVDS_SUM, 1, 1, &c);
        } else {
          ncclAllReduce(buf, out, count, ncclFloat32, ncclSum, sh->raw[rank], s);
        }
      };
      auto finish = [&] {
        if (pass == 0)
          hvds__nccl_ctx_sync(ctx);
        else
          cudaStreamSynchronize(s);
      };
      for (int i = 0; i < 3; i++) once();  // warm-up
      finish();
      sh->sync.arrive_and_wait();
      double t0 = now_s();
      for (int i = 0; i < iters; i++) once();
      finish();
      double dt = (now_s() - t0) / iters;
      sh->sync.arrive_and_wait();
      if (rank == 0) (pass == 0 ? sh->ours : sh->direct).push_back(dt);
    }
  }
  cudaFree(buf);
  cudaFree(out);
  hvds__nccl_comm_destroy(comm);
  hvds__nccl_ctx_destroy(ctx);
}

}  // namespace

int main(int argc, char** argv) {
  size_t max_mib = argc > 1 ? strtoul(argv[1], nullptr, 10) : 256;
  int iters = argc > 2 ? atoi(argv[2]) : 20;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    fprintf(stderr, "nccl_allreduce_bench: no CUDA device\n");
    return 1;
  }
  std::vector<size_t> sizes;
  for (size_t b = 64 << 10; b <= (max_mib << 20); b *= 4) sizes.push_back(b);
  Shared sh(n);
  sh.raw.resize(n);
  std::vector<int> devs(n);
  for (int i = 0; i < n; i++) devs[i] = i;
  if (ncclCommInitAll(sh.raw.data(), n, devs.data()) != ncclSuccess) {
    fprintf(stderr, "nccl_allreduce_bench: ncclCommInitAll failed\n");
    return 1;
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < n; r++) threads.emplace_back(rank_main, &sh, r, n, sizes, iters);
  for (auto& t : threads) t.join();
  for (ncclComm_t c : sh.raw) ncclCommDestroy(c);
  int version = hvds__nccl_version();
  printf("allreduce float32 sum out of place, %d rank(s) on %d GPU(s), NCCL %d, %d iterations\n", n, n,
         version, iters);
  printf("%12s %10s %12s %12s %10s %12s %12s %8s\n", "bytes", "ours us", "ours algbw",
         "ours busbw", "nccl us", "nccl algbw", "nccl busbw", "ratio");
  double factor = 2.0 * (n - 1) / n;
  for (size_t i = 0; i < sizes.size(); i++) {
    double a = sizes[i] / sh.ours[i] / 1e9, b = sizes[i] / sh.direct[i] / 1e9;
    printf("%12zu %10.1f %7.1f GB/s %7.1f GB/s %10.1f %7.1f GB/s %7.1f GB/s %8.3f\n", sizes[i],
           sh.ours[i] * 1e6, a, a * factor, sh.direct[i] * 1e6, b, b * factor,
           sh.direct[i] / sh.ours[i]);
  }
  printf("ratio = ncclAllReduce time / our path's time (1.0: no overhead)\n");
  return 0;
}
