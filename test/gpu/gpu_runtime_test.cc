// GPU tensors through the real runtime and the real device library, on one GPU, without any
// framework: the public C API on cudaMalloc'd memory. Run under the launcher by test/gpu/run.sh:
//   HVDSPARSE_GPU_OPERATIONS=host  hvdsparse run -np 2 gpu_runtime_test --gtest_filter='Staged.*'
//     (two processes sharing the GPU through host staging)
//   HVDSPARSE_GPU_OPERATIONS=nccl  hvdsparse run -np 1 gpu_runtime_test --gtest_filter='Routed.*'
//     (the NCCL route; its figures against raw ncclAllReduce on the same buffers go to
//     $HVDS_GPU_OUT/gpu_runtime.csv)
// Every producer stream is held by a host function that sleeps before the input is written, so
// a runtime that read the input without waiting for the stream would read the old values.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "hvdsparse.h"

#define CUDA_OK(call)                                                        \
  do {                                                                       \
    cudaError_t rc_ = (call);                                                \
    ASSERT_EQ(rc_, cudaSuccess) << #call << ": " << cudaGetErrorString(rc_); \
  } while (0)

namespace {

void CUDART_CB Sleep(void* ms) { usleep((useconds_t)(*(int*)ms) * 1000); }

// Page-locked sources of the late writes: the copies read them after the sleep, so they live
// until the test's end (freed by the fixture).
std::vector<float*> pinned_sources;

// count floats of value v written to p on stream s, after the stream slept *ms (ms NULL: at
// once); returns before the write happened.
void WriteLate(float* p, size_t count, float v, cudaStream_t s, int* ms) {
  float* src = nullptr;
  ASSERT_EQ(cudaMallocHost(&src, count * sizeof(float) + 1), cudaSuccess);
  pinned_sources.push_back(src);
  std::fill(src, src + count, v);
  if (ms != nullptr) {
    ASSERT_EQ(cudaLaunchHostFunc(s, Sleep, ms), cudaSuccess);
  }
  ASSERT_EQ(cudaMemcpyAsync(p, src, count * sizeof(float), cudaMemcpyHostToDevice, s), cudaSuccess);
}

std::vector<float> Read(const void* p, size_t count, cudaStream_t s) {
  std::vector<float> v(count);
  cudaMemcpyAsync(v.data(), p, count * sizeof(float), cudaMemcpyDeviceToHost, s);
  cudaStreamSynchronize(s);
  return v;
}

hvds_tensor_t View(void* p, size_t count) {
  hvds_tensor_t t = {};
  t.data = p;
  t.dtype = HVDS_FLOAT32;
  t.device = 0;
  t.ndim = 1;
  t.shape[0] = (int64_t)count;
  return t;
}

void* GpuAlloc(void*, hvds_dtype_t, int32_t, const int64_t*, size_t bytes) {
  void* p = nullptr;
  return cudaMalloc(&p, bytes ? bytes : 1) == cudaSuccess ? p : nullptr;
}

hvds_result_t Complete(hvds_result_t (*enqueue)(const hvds_tensor_t*, hvds_tensor_t*,
                                                const hvds_op_options_t*, hvds_handle_t*),
                       hvds_tensor_t* in, hvds_tensor_t* out, const hvds_op_options_t& o) {
  hvds_handle_t h = 0;
  hvds_result_t rc = enqueue(in, out, &o, &h);
  if (rc != HVDS_SUCCESS) return rc;
  rc = hvds_wait(h, 60000);
  hvds_release(h);
  return rc;
}

class Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
    for (float* p : pinned_sources) cudaFreeHost(p);
    pinned_sources.clear();
  }
  cudaStream_t stream_ = nullptr;
  int delay_ms_ = 30;
};

using Staged = Gpu;
using Routed = Gpu;

TEST_F(Staged, EveryDenseCollectiveReadsAfterTheProducersStream) {
  int r = hvds_rank(), n = hvds_size();
  const size_t count = 1 << 20;
  float *in = nullptr, *out = nullptr;
  CUDA_OK(cudaMalloc(&in, count * sizeof(float)));
  CUDA_OK(cudaMalloc(&out, count * sizeof(float)));
  hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
  o.stream = (int64_t)(intptr_t)stream_;
  // Allreduce out of place, then in place: the sum of 1 + rank.
  WriteLate(in, count, 1.0f + r, stream_, &delay_ms_);
  hvds_tensor_t vi = View(in, count), vo = View(out, count);
  o.name = "staged.out";
  ASSERT_EQ(Complete(hvds_allreduce_async, &vi, &vo, o), HVDS_SUCCESS) << hvds_last_error();
  float sum = n * (n + 1) / 2.0f;
  std::vector<float> got = Read(out, count, stream_);
  EXPECT_EQ(std::count(got.begin(), got.end(), sum), (long)count);
  o.name = "staged.in";
  ASSERT_EQ(Complete(hvds_allreduce_async, &vi, &vi, o), HVDS_SUCCESS) << hvds_last_error();
  got = Read(in, count, stream_);
  EXPECT_EQ(std::count(got.begin(), got.end(), sum), (long)count);
  // Broadcast from the last rank.
  WriteLate(in, count, 10.0f + r, stream_, &delay_ms_);
  o.name = "staged.bcast";
  o.root_rank = n - 1;
  hvds_handle_t h = 0;
  ASSERT_EQ(hvds_broadcast_async(&vi, &o, &h), HVDS_SUCCESS) << hvds_last_error();
  ASSERT_EQ(hvds_wait(h, 60000), HVDS_SUCCESS) << hvds_handle_error(h);
  hvds_release(h);
  got = Read(in, 4, stream_);
  EXPECT_EQ(got, std::vector<float>(4, 10.0f + n - 1));
  // Allgather of rank + 1 elements each, into memory of the allocator.
  o.root_rank = 0;
  o.name = "staged.gather";
  o.alloc = GpuAlloc;
  WriteLate(in, r + 1, (float)r, stream_, &delay_ms_);
  hvds_tensor_t vg = View(in, r + 1);
  ASSERT_EQ(hvds_allgather_async(&vg, &o, &h), HVDS_SUCCESS) << hvds_last_error();
  ASSERT_EQ(hvds_wait(h, 60000), HVDS_SUCCESS) << hvds_handle_error(h);
  hvds_tensor_t g;
  ASSERT_EQ(hvds_handle_output(h, 0, &g), HVDS_SUCCESS);
  EXPECT_EQ(g.device, 0);
  std::vector<float> want;
  for (int q = 0; q < n; q++) want.insert(want.end(), q + 1, (float)q);
  EXPECT_EQ(Read(g.data, want.size(), stream_), want);
  cudaFree(g.data);
  hvds_release(h);
  cudaFree(in);
  cudaFree(out);
}

TEST_F(Staged, ManyOperationsKeepGpuMemoryFlat) {
  const size_t count = 1 << 18;
  float* in = nullptr;
  CUDA_OK(cudaMalloc(&in, count * sizeof(float)));
  hvds_tensor_t v = View(in, count);
  hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
  o.op = HVDS_AVERAGE;
  o.stream = (int64_t)(intptr_t)stream_;
  size_t free_before = 0, free_after = 0, total = 0;
  for (int i = 0; i < 1000; i++) {
    if (i == 20) CUDA_OK(cudaMemGetInfo(&free_before, &total));  // after the warm-up
    std::string name = "flat." + std::to_string(i % 4);
    o.name = name.c_str();
    ASSERT_EQ(Complete(hvds_allreduce_async, &v, &v, o), HVDS_SUCCESS) << hvds_last_error();
  }
  CUDA_OK(cudaMemGetInfo(&free_after, &total));
  EXPECT_EQ(free_after, free_before) << "GPU memory moved over 1000 operations";
  cudaFree(in);
}

TEST_F(Routed, AFusedAllreduceWaitsForEveryProducer) {
  ASSERT_EQ(hvds_size(), 1) << "the routed cases run at np 1 (one GPU)";
  const size_t count = 1 << 16;
  std::vector<float*> bufs(8);
  std::vector<hvds_tensor_t> views;
  for (auto& b : bufs) {
    CUDA_OK(cudaMalloc(&b, count * sizeof(float)));
    views.push_back(View(b, count));
  }
  int right = 0;
  for (int round = 0; round < 100; round++) {
    for (size_t i = 0; i < bufs.size(); i++)
      WriteLate(bufs[i], count, (float)(round + i), stream_, i == 0 ? &delay_ms_ : nullptr);
    hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
    o.name = "routed.group";
    o.stream = (int64_t)(intptr_t)stream_;
    o.prescale = 2.0;
    hvds_handle_t h = 0;
    ASSERT_EQ(
        hvds_grouped_allreduce_async((int32_t)views.size(), views.data(), views.data(), &o, &h),
        HVDS_SUCCESS)
        << hvds_last_error();
    ASSERT_EQ(hvds_wait(h, 60000), HVDS_SUCCESS) << hvds_handle_error(h);
    hvds_release(h);
    bool ok = true;
    for (size_t i = 0; i < bufs.size(); i++)
      ok &= Read(bufs[i], 4, stream_) == std::vector<float>(4, 2.0f * (float)(round + i));
    right += ok;
  }
  EXPECT_EQ(right, 100);
  for (auto b : bufs) cudaFree(b);
}

TEST_F(Routed, AllgatherAndReducescatterOnTheGpu) {
  ASSERT_EQ(hvds_size(), 1) << "the routed cases run at np 1 (one GPU)";
  const size_t count = 1 << 16;
  float* in = nullptr;
  CUDA_OK(cudaMalloc(&in, count * sizeof(float)));
  WriteLate(in, count, 3.0f, stream_, &delay_ms_);
  hvds_tensor_t v = View(in, count);
  hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
  o.stream = (int64_t)(intptr_t)stream_;
  o.alloc = GpuAlloc;
  o.name = "routed.gather";
  hvds_handle_t h = 0;
  ASSERT_EQ(hvds_allgather_async(&v, &o, &h), HVDS_SUCCESS) << hvds_last_error();
  ASSERT_EQ(hvds_wait(h, 60000), HVDS_SUCCESS) << hvds_handle_error(h);
  hvds_tensor_t g;
  ASSERT_EQ(hvds_handle_output(h, 0, &g), HVDS_SUCCESS);
  EXPECT_EQ(g.device, 0);
  std::vector<float> got = Read(g.data, count, stream_);
  EXPECT_EQ(std::count(got.begin(), got.end(), 3.0f), (long)count);
  cudaFree(g.data);
  hvds_release(h);
  o.name = "routed.rscatter";
  o.prescale = 2.0;  // through the fusion buffer: the input stays as it was
  ASSERT_EQ(hvds_reducescatter_async(&v, &o, &h), HVDS_SUCCESS) << hvds_last_error();
  ASSERT_EQ(hvds_wait(h, 60000), HVDS_SUCCESS) << hvds_handle_error(h);
  ASSERT_EQ(hvds_handle_output(h, 0, &g), HVDS_SUCCESS);
  got = Read(g.data, count, stream_);
  EXPECT_EQ(std::count(got.begin(), got.end(), 6.0f), (long)count);
  got = Read(in, count, stream_);
  EXPECT_EQ(std::count(got.begin(), got.end(), 3.0f), (long)count) << "the input changed";
  cudaFree(g.data);
  hvds_release(h);
  cudaFree(in);
}

TEST_F(Routed, BroadcastAndAlltoallOnTheGpu) {
  ASSERT_EQ(hvds_size(), 1) << "the routed cases run at np 1 (one GPU)";
  const size_t count = 1 << 16;
  float* in = nullptr;
  CUDA_OK(cudaMalloc(&in, count * sizeof(float)));
  WriteLate(in, count, 5.0f, stream_, &delay_ms_);
  hvds_tensor_t v = View(in, count);
  hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
  o.stream = (int64_t)(intptr_t)stream_;
  o.name = "routed.bcast";
  hvds_handle_t h = 0;
  ASSERT_EQ(hvds_broadcast_async(&v, &o, &h), HVDS_SUCCESS) << hvds_last_error();
  ASSERT_EQ(hvds_wait(h, 60000), HVDS_SUCCESS) << hvds_handle_error(h);
  hvds_release(h);
  std::vector<float> got = Read(in, count, stream_);
  EXPECT_EQ(std::count(got.begin(), got.end(), 5.0f), (long)count);
  WriteLate(in, count, 7.0f, stream_, &delay_ms_);
  o.name = "routed.alltoall";
  o.alloc = GpuAlloc;
  ASSERT_EQ(hvds_alltoall_async(&v, &o, &h), HVDS_SUCCESS) << hvds_last_error();
  ASSERT_EQ(hvds_wait(h, 60000), HVDS_SUCCESS) << hvds_handle_error(h);
  hvds_tensor_t a;
  ASSERT_EQ(hvds_handle_output(h, 0, &a), HVDS_SUCCESS);
  EXPECT_EQ(a.device, 0);
  EXPECT_EQ(a.shape[0], (int64_t)count);
  got = Read(a.data, count, stream_);
  EXPECT_EQ(std::count(got.begin(), got.end(), 7.0f), (long)count);
  const int32_t* splits = nullptr;
  ASSERT_EQ(hvds_handle_splits(h, &splits), 1);
  EXPECT_EQ(splits[0], (int32_t)count);
  cudaFree(a.data);
  hvds_release(h);
  cudaFree(in);
}

// Run both ways by run.sh: with HOROVOD_ENABLE_ASYNC_COMPLETION=1 the handle completes at launch
// and hvds_handle_stream_wait orders the result on the consumer's stream; without it there is
// nothing left to wait for. Either way the consumer's stream reads the result, 100 of 100.
TEST_F(Routed, TheConsumersStreamSeesTheResult) {
  ASSERT_EQ(hvds_size(), 1) << "the routed cases run at np 1 (one GPU)";
  const char* knob = getenv("HOROVOD_ENABLE_ASYNC_COMPLETION");
  bool at_launch = knob != nullptr && std::string(knob) == "1";
  const size_t count = 1 << 20;
  float* in = nullptr;
  CUDA_OK(cudaMalloc(&in, count * sizeof(float)));
  hvds_tensor_t v = View(in, count);
  hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
  o.stream = (int64_t)(intptr_t)stream_;
  o.name = "routed.consumer";
  o.postscale = 2.0;
  int right = 0, ms = 2;
  for (int i = 0; i < 100; i++) {
    WriteLate(in, count, (float)i, stream_, &ms);
    hvds_handle_t h = 0;
    ASSERT_EQ(hvds_allreduce_async(&v, &v, &o, &h), HVDS_SUCCESS) << hvds_last_error();
    ASSERT_EQ(hvds_wait(h, 60000), HVDS_SUCCESS) << hvds_handle_error(h);
    EXPECT_EQ(hvds_handle_gpu_work(h), at_launch ? 0 : -1);
    ASSERT_EQ(hvds_handle_stream_wait(h, o.stream), HVDS_SUCCESS) << hvds_last_error();
    hvds_release(h);
    std::vector<float> got = Read(in, count, stream_);
    right += std::count(got.begin(), got.end(), 2.0f * i) == (long)count;
  }
  EXPECT_EQ(right, 100);
  cudaFree(in);
}

// hvds_topk_feedback_device: the cuda/ kernel through the device library, queued behind a late
// producer on the caller's stream, equal to hvds_topk_feedback on the host (float64, exact).
TEST_F(Routed, TopKOnTheGpuEqualsTheCpuSelection) {
  const int64_t n = 1 << 20, k = 1000;
  std::vector<double> acc(n), grad(n);
  for (int64_t i = 0; i < n; i++) {
    acc[i] = (double)((i * 7919) % 2001 - 1000) / 8;  // many ties: ties go to lower indices
    grad[i] = (double)((i * 104729) % 301 - 150) / 4;
  }
  double *d_acc = nullptr, *d_grad = nullptr, *d_vals = nullptr;
  int32_t* d_idx = nullptr;
  CUDA_OK(cudaMalloc(&d_acc, n * 8));
  CUDA_OK(cudaMalloc(&d_grad, n * 8));
  CUDA_OK(cudaMalloc(&d_vals, k * 8));
  CUDA_OK(cudaMalloc(&d_idx, k * 4));
  int ms = delay_ms_;
  CUDA_OK(cudaLaunchHostFunc(stream_, Sleep, &ms));  // the copies wait behind a slow producer
  CUDA_OK(cudaMemcpyAsync(d_acc, acc.data(), n * 8, cudaMemcpyHostToDevice, stream_));
  CUDA_OK(cudaMemcpyAsync(d_grad, grad.data(), n * 8, cudaMemcpyHostToDevice, stream_));
  ASSERT_EQ(hvds_topk_feedback_device(0, (int64_t)(intptr_t)stream_, d_acc, d_grad, HVDS_FLOAT64, n,
                                      k, d_idx, HVDS_INT32, d_vals),
            HVDS_SUCCESS)
      << hvds_last_error();
  std::vector<int32_t> got_idx(k), want_idx(k);
  std::vector<double> got_vals(k), want_vals(k), got_acc(n);
  CUDA_OK(cudaMemcpyAsync(got_idx.data(), d_idx, k * 4, cudaMemcpyDeviceToHost, stream_));
  CUDA_OK(cudaMemcpyAsync(got_vals.data(), d_vals, k * 8, cudaMemcpyDeviceToHost, stream_));
  CUDA_OK(cudaMemcpyAsync(got_acc.data(), d_acc, n * 8, cudaMemcpyDeviceToHost, stream_));
  CUDA_OK(cudaStreamSynchronize(stream_));
  hvds_topk_plan_t plan = {k, 0, 0, 0};
  int64_t count = 0;
  ASSERT_EQ(hvds_topk_feedback(acc.data(), grad.data(), HVDS_FLOAT64, n, &plan, want_idx.data(),
                               HVDS_INT32, want_vals.data(), &count, nullptr),
            HVDS_SUCCESS);
  ASSERT_EQ(count, k);
  EXPECT_EQ(got_idx, want_idx);
  EXPECT_EQ(got_vals, want_vals);
  EXPECT_EQ(got_acc, acc);
  cudaFree(d_acc), cudaFree(d_grad), cudaFree(d_vals), cudaFree(d_idx);
}

// hvds_quantize / hvds_dequantize on the GPU through the device library: behind a delayed
// producer, the bytes and values of the host's coder.
TEST_F(Routed, TheQuantizerOnTheGpuGivesTheHostsBytes) {
  const int64_t n = 3 * 1024 + 77;
  const int bits = 4;
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; i++) v[i] = (float)((i * 7919) % 2001 - 1000) / 16;
  const int64_t qb = hvds_quantized_bytes(n, bits);
  float *d_v = nullptr, *d_back = nullptr;
  uint8_t* d_q = nullptr;
  CUDA_OK(cudaMalloc(&d_v, n * 4));
  CUDA_OK(cudaMalloc(&d_back, n * 4));
  CUDA_OK(cudaMalloc(&d_q, qb));
  int ms = delay_ms_;
  CUDA_OK(cudaLaunchHostFunc(stream_, Sleep, &ms));
  CUDA_OK(cudaMemcpyAsync(d_v, v.data(), n * 4, cudaMemcpyHostToDevice, stream_));
  int64_t s = (int64_t)(intptr_t)stream_;
  ASSERT_EQ(hvds_quantize(0, s, d_v, n, HVDS_FLOAT32, bits, 99, d_q), HVDS_SUCCESS)
      << hvds_last_error();
  ASSERT_EQ(hvds_dequantize(0, s, d_q, n, bits, HVDS_FLOAT32, d_back), HVDS_SUCCESS)
      << hvds_last_error();
  std::vector<uint8_t> got_q(qb), want_q(qb);
  std::vector<float> got_back(n), want_back(n);
  CUDA_OK(cudaMemcpyAsync(got_q.data(), d_q, qb, cudaMemcpyDeviceToHost, stream_));
  CUDA_OK(cudaMemcpyAsync(got_back.data(), d_back, n * 4, cudaMemcpyDeviceToHost, stream_));
  CUDA_OK(cudaStreamSynchronize(stream_));
  ASSERT_EQ(hvds_quantize(-1, 0, v.data(), n, HVDS_FLOAT32, bits, 99, want_q.data()), HVDS_SUCCESS);
  ASSERT_EQ(hvds_dequantize(-1, 0, want_q.data(), n, bits, HVDS_FLOAT32, want_back.data()),
            HVDS_SUCCESS);
  EXPECT_EQ(got_q, want_q);
  EXPECT_EQ(got_back, want_back);
  cudaFree(d_v), cudaFree(d_back), cudaFree(d_q);
}

// Median microseconds of reps calls of fn.
template <class F>
double MedianUs(F fn, int reps) {
  std::vector<double> t;
  for (int i = 0; i < reps; i++) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    t.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

TEST_F(Routed, AgainstRawNcclAllReduceOnTheSameBuffers) {
  ASSERT_EQ(hvds_size(), 1) << "the routed cases run at np 1 (one GPU)";
  ncclComm_t comm;
  int dev = 0;
  ASSERT_EQ(ncclCommInitAll(&comm, 1, &dev), ncclSuccess);
  const char* dir = getenv("HVDS_GPU_OUT");
  std::string path = std::string(dir ? dir : ".") + "/gpu_runtime.csv";
  FILE* csv = fopen(path.c_str(), "w");
  ASSERT_NE(csv, nullptr) << path;
  fprintf(csv, "case,bytes,hvdsparse_us,nccl_us,ratio\n");
  for (size_t bytes : {(size_t)4 << 10, (size_t)64 << 10, (size_t)1 << 20, (size_t)16 << 20,
                       (size_t)64 << 20, (size_t)256 << 20}) {
    size_t count = bytes / 4;
    float *in = nullptr, *out = nullptr;
    CUDA_OK(cudaMalloc(&in, bytes));
    CUDA_OK(cudaMalloc(&out, bytes));
    CUDA_OK(cudaMemset(in, 0, bytes));
    hvds_tensor_t vi = View(in, count), vo = View(out, count);
    hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
    o.name = "routed.bench";
    o.stream = (int64_t)(intptr_t)stream_;
    auto ours = [&] { Complete(hvds_allreduce_async, &vi, &vo, o); };
    auto raw = [&] {
      ncclAllReduce(in, out, count, ncclFloat, ncclSum, comm, stream_);
      cudaStreamSynchronize(stream_);
    };
    for (int i = 0; i < 5; i++) ours(), raw();
    double a = MedianUs(ours, 30), b = MedianUs(raw, 30);
    fprintf(csv, "allreduce_out_of_place,%zu,%.1f,%.1f,%.3f\n", bytes, a, b, b / a);
    printf("allreduce %10zu B: hvdsparse %.1f us, ncclAllReduce %.1f us, algbw ratio %.3f\n", bytes,
           a, b, b / a);
    if (bytes >= ((size_t)64 << 20)) {
      EXPECT_GE(b / a, 0.95) << bytes << " bytes";
    }
    if (bytes == ((size_t)4 << 10)) {
      EXPECT_LE(a - b, 10.0) << "us more per call at 4 KiB";
    }
    cudaFree(in);
    cudaFree(out);
  }
  // 64 tensors of 256 KiB, fused, against one of 16 MiB.
  std::vector<float*> parts(64);
  std::vector<hvds_tensor_t> views;
  for (auto& p : parts) {
    CUDA_OK(cudaMalloc(&p, 256 << 10));
    views.push_back(View(p, (256 << 10) / 4));
  }
  float* whole = nullptr;
  CUDA_OK(cudaMalloc(&whole, 16 << 20));
  hvds_tensor_t vw = View(whole, (16 << 20) / 4);
  hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
  o.stream = (int64_t)(intptr_t)stream_;
  auto fused = [&] {
    o.name = "routed.parts";
    hvds_handle_t h = 0;
    hvds_grouped_allreduce_async(64, views.data(), views.data(), &o, &h);
    hvds_wait(h, 60000);
    hvds_release(h);
  };
  auto single = [&] {
    o.name = "routed.whole";
    Complete(hvds_allreduce_async, &vw, &vw, o);
  };
  for (int i = 0; i < 5; i++) fused(), single();
  double f = MedianUs(fused, 30), s = MedianUs(single, 30);
  fprintf(csv, "fused_64x256KiB_vs_16MiB,%d,%.1f,%.1f,%.3f\n", 16 << 20, f, s, f / s);
  printf("64 x 256 KiB fused %.1f us, one 16 MiB %.1f us: %.3fx\n", f, s, f / s);
  EXPECT_LE(f / s, 1.3);
  fclose(csv);
  for (auto p : parts) cudaFree(p);
  cudaFree(whole);
  ncclCommDestroy(comm);
}

class Runtime : public ::testing::Environment {
 public:
  void SetUp() override { ASSERT_EQ(hvds_init(), HVDS_SUCCESS) << hvds_last_error(); }
  void TearDown() override { hvds_shutdown(); }
};

const auto* const kRuntime = ::testing::AddGlobalTestEnvironment(new Runtime);

}  // namespace
