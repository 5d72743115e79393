// GPU tensors staged through host memory (runtime/device_staging.h), over the fake device library
// (fake_device_library.c): its "GPU memory" is inaccessible to the runtime, so these tests prove
// the runtime's control flow (every byte goes through the library's copies, on the caller's GPU
// and stream, and comes back before the handle completes), not CUDA's. Ranks are threads
// (instance_ranks.h), rank r's tensors on "GPU" r as with cuda:local_rank.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gpu_tensors.h"

namespace {

using namespace hvds_test;  // NOLINT: the shared helpers of gpu_tensors.h

TEST(DeviceStaging, AllreduceInAndOutOfPlaceComesBackToTheGpuOnTheCallersStream) {
  fake_device_stats_t before = Fake::Get().stats();
  InstanceRanks ranks(3);
  ranks.Run([&](int rank, hvds_runtime_t* rt) {
    DeviceTensor in({1.0f * rank, 2.0f, 3.0f}, rank), out({0, 0, 0}, rank);
    hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
    o.stream = 7000 + rank;
    hvds_tensor_t out_view = out.View();
    hvds_handle_t h1 = Enqueue(rt, HVDS_MSG_ALLREDUCE, "out_of_place", in.View(), &out_view, o);
    hvds_handle_t h2 = Enqueue(rt, HVDS_MSG_ALLREDUCE, "in_place", in.View(), nullptr, o);
    EXPECT_EQ(Fake::Get().stats().last_stream / 1000, 7);  // the copy in ran on the stream given
    ranks.Sync();
    Finish(ranks, rt, h1, "out_of_place");
    Finish(ranks, rt, h2, "in_place");
    EXPECT_EQ(out.Read(), (std::vector<float>{3, 6, 9}));
    EXPECT_EQ(in.Read(), (std::vector<float>{3, 6, 9}));
    hvds__release(rt, h1);
    hvds__release(rt, h2);
  });
  fake_device_stats_t after = Fake::Get().stats();
  EXPECT_EQ(after.copies_to_host - before.copies_to_host, 6);  // one per rank and operation
  EXPECT_EQ(after.copies_to_device - before.copies_to_device, 6);
}

TEST(DeviceStaging, EveryDenseCollectiveOnGpuTensorsMatchesItsCpuResult) {
  InstanceRanks ranks(2);
  ranks.Run([&](int rank, hvds_runtime_t* rt) {
    GpuAllocator gpu{rank, {}};
    // Broadcast from rank 1, in place.
    DeviceTensor b({10.0f + rank, 20.0f + rank}, rank);
    hvds_op_options_t ob = HVDS_OP_OPTIONS_INIT;
    ob.root_rank = 1;
    hvds_tensor_t bv = b.View();
    hvds_handle_t hb = Enqueue(rt, HVDS_MSG_BROADCAST, "bcast", bv, &bv, ob);
    // Allgather of uneven first dimensions: rank 0 gives 1 row, rank 1 two rows of 2.
    std::vector<float> rows = rank == 0 ? std::vector<float>{1, 2} : std::vector<float>{3, 4, 5, 6};
    DeviceTensor g(rows, rank, {rank + 1, 2});
    hvds_op_options_t og = HVDS_OP_OPTIONS_INIT;
    gpu.Use(og);
    hvds_handle_t hg = Enqueue(rt, HVDS_MSG_ALLGATHER, "gather", g.View(), nullptr, og);
    // Alltoall with splits: rank r sends r+1 rows to rank 0 and 1 row to rank 1.
    std::vector<float> send;
    for (int i = 0; i < rank + 2; i++) send.push_back(100.0f * rank + i);
    DeviceTensor a(send, rank);
    hvds_op_options_t oa = HVDS_OP_OPTIONS_INIT;
    int32_t splits[2] = {rank + 1, 1};
    oa.splits = splits;
    oa.nsplits = 2;
    gpu.Use(oa);
    hvds_handle_t ha = Enqueue(rt, HVDS_MSG_ALLTOALL, "alltoall", a.View(), nullptr, oa);
    // Reducescatter, averaged: 4 rows of 1, rank 0 gets rows 0-1, rank 1 rows 2-3.
    DeviceTensor r({1.0f, 2.0f, 3.0f, 4.0f * (rank + 1)}, rank, {4, 1});
    hvds_op_options_t orr = HVDS_OP_OPTIONS_INIT;
    orr.op = HVDS_AVERAGE;
    gpu.Use(orr);
    hvds_handle_t hr = Enqueue(rt, HVDS_MSG_REDUCESCATTER, "rscatter", r.View(), nullptr, orr);
    ranks.Sync();
    Finish(ranks, rt, hb, "bcast");
    Finish(ranks, rt, hg, "gather");
    Finish(ranks, rt, ha, "alltoall");
    Finish(ranks, rt, hr, "rscatter");

    EXPECT_EQ(b.Read(), (std::vector<float>{11, 21}));
    hvds_tensor_t go = Output(rt, hg), ao = Output(rt, ha), ro = Output(rt, hr);
    for (const hvds_tensor_t* t : {&go, &ao, &ro}) {
      EXPECT_EQ(t->device, rank) << "the result stays on the rank's GPU";
      EXPECT_NE(std::find(gpu.given.begin(), gpu.given.end(), t->data), gpu.given.end())
          << "the result is in memory of the caller's allocator";
    }
    EXPECT_EQ(go.shape[0], 3);
    EXPECT_EQ(DeviceTensor::ReadAt(go.data, Elements(go)), (std::vector<float>{1, 2, 3, 4, 5, 6}));
    std::vector<float> want_a =
        rank == 0 ? std::vector<float>{0, 100, 101} : std::vector<float>{1, 102};
    EXPECT_EQ(DeviceTensor::ReadAt(ao.data, Elements(ao)), want_a);
    std::vector<float> want_r = rank == 0 ? std::vector<float>{1, 2} : std::vector<float>{3, 6};
    EXPECT_EQ(DeviceTensor::ReadAt(ro.data, Elements(ro)), want_r);
    for (hvds_handle_t h : {hb, hg, ha, hr}) hvds__release(rt, h);
  });
}

TEST(DeviceStaging, GroupedAndFusedAllreducesScaleLikeTheCpuPath) {
  InstanceRanks ranks(2);
  ranks.Run([&](int rank, hvds_runtime_t* rt) {
    DeviceTensor x({1.0f + rank, 2.0f}, rank), y({4.0f, 8.0f * (rank + 1), 1.0f}, rank);
    hvds_tensor_t in[2] = {x.View(), y.View()};
    hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
    o.name = "grouped";
    o.op = HVDS_AVERAGE;
    o.prescale = 2.0;
    o.postscale = 0.5;
    hvds_handle_t h = 0;
    ASSERT_EQ(hvds__enqueue(rt, HVDS_MSG_ALLREDUCE, "Allreduce", 2, in, in, &o, &h), HVDS_SUCCESS)
        << hvds_last_error();
    ranks.Sync();
    Finish(ranks, rt, h, "grouped");
    // The mean of the prescaled inputs, postscaled: ((2 + 4) / 2, (4 + 4) / 2) x 0.5.
    EXPECT_EQ(x.Read(), (std::vector<float>{1.5f, 2.0f}));
    EXPECT_EQ(y.Read(), (std::vector<float>{4.0f, 12.0f, 1.0f}));
    hvds__release(rt, h);
  });
}

TEST(DeviceStaging, CpuOnOneRankAndGpuOnAnotherFailsOnEveryRank) {
  InstanceRanks ranks(2);
  ranks.Run([&](int rank, hvds_runtime_t* rt) {
    std::vector<float> host = {1, 2};
    DeviceTensor gpu({1, 2}, rank);
    hvds_tensor_t t = rank == 0 ? hvds_test::Tensor(host) : gpu.View();
    hvds_handle_t h = Enqueue(rt, HVDS_MSG_ALLREDUCE, "mixed", t, nullptr);
    ranks.Sync();
    ranks.CycleUntil(rt, [&] { return Peek(rt, h).status != HVDS_IN_PROGRESS; });
    EXPECT_EQ(Peek(rt, h).message,
              "Mismatched ALLREDUCE CPU/GPU device selection: One rank specified device CPU, but "
              "another rank specified device GPU. [tensor: mixed; ranks 0 and 1]");
    hvds__release(rt, h);
  });
}

TEST(DeviceStaging, AFailedCopyNamesTheRankTheTensorAndTheReason) {
  InstanceRanks ranks(2);
  ranks.Run([&](int rank, hvds_runtime_t* rt) {
    // The copy back to rank 1's GPU fails: rank 1's handle says so, rank 0's result is intact.
    if (rank == 0) Fake::Get().fail_copies(1, 0, 1);
    ranks.Sync();
    DeviceTensor t({1, 2}, rank);
    hvds_handle_t h = Enqueue(rt, HVDS_MSG_ALLREDUCE, "grad.fc1", t.View(), nullptr);
    ranks.Sync();
    ranks.CycleUntil(rt, [&] { return Peek(rt, h).status != HVDS_IN_PROGRESS; });
    if (rank == 0) {
      EXPECT_EQ(Peek(rt, h).status, HVDS_SUCCESS) << Peek(rt, h).message;
      EXPECT_EQ(t.Read(), (std::vector<float>{2, 4}));
    } else {
      EXPECT_EQ(Peek(rt, h).status, HVDS_SYSTEM_ERROR);
      EXPECT_EQ(Peek(rt, h).message,
                "'grad.fc1' on rank 1: copying the result to GPU 1 failed (fake cudaMemcpyAsync: "
                "an illegal memory access was encountered (injected))");
    }
    hvds__release(rt, h);
    ranks.Sync();
    // The copy in fails on rank 1: its enqueue is refused with the reason; nothing is queued.
    if (rank == 0) Fake::Get().fail_copies(1, 1, 0);
    ranks.Sync();
    if (rank == 1) {
      hvds_tensor_t v = t.View();
      hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
      o.name = "grad.fc2";
      EXPECT_EQ(hvds__enqueue(rt, HVDS_MSG_ALLREDUCE, "Allreduce", 1, &v, nullptr, &o, &h),
                HVDS_SYSTEM_ERROR);
      EXPECT_EQ(std::string(hvds_last_error()),
                "Allreduce 'grad.fc2' on rank 1: copying the tensor from GPU 1 to host memory "
                "failed (fake cudaMemcpyAsync: an illegal memory access was encountered "
                "(injected))");
    }
    ranks.Sync();
    if (rank == 0) Fake::Get().fail_copies(-2, 0, 0);
  });
}

// What enqueueing a GPU tensor of type under name on one rank gets: the code and the message.
std::pair<hvds_result_t, std::string> Refusal(int32_t type, const char* what, const char* name) {
  std::pair<hvds_result_t, std::string> out;
  InstanceRanks ranks(1);
  ranks.Run([&](int, hvds_runtime_t* rt) {
    DeviceTensor t({1, 2}, 0);
    hvds_tensor_t v = t.View();
    hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
    o.name = name;
    hvds_handle_t h = 0;
    out.first = hvds__enqueue(rt, type, what, 1, &v, nullptr, &o, &h);
    out.second = hvds_last_error();
  });
  return out;
}

TEST(DeviceStaging, AGatheringOperationWithoutAnAllocatorIsRefused) {
  EXPECT_EQ(Refusal(HVDS_MSG_ALLGATHER, "Allgather", "emb"),
            std::make_pair(HVDS_INVALID_ARGUMENT,
                           std::string("Allgather 'emb' of a GPU tensor needs an allocator "
                                       "(options alloc) for its output on the GPU")));
}

// Staged gathering operations whose caller's allocator gives no GPU memory on rank 1: the
// collective ran on host memory for every rank, so rank 0 gets its results and rank 1's
// operations fail naming the tensor, the rank and the size.
TEST(DeviceStaging, AFailedGpuAllocationFailsThatRanksOperationOnly) {
  InstanceRanks ranks(2);
  ranks.Run([&](int rank, hvds_runtime_t* rt) {
    GpuAllocator gpu{rank, {}};
    hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
    if (rank == 1)
      o.alloc = [](void*, hvds_dtype_t, int32_t, const int64_t*, size_t) -> void* {
        return nullptr;
      };
    else
      gpu.Use(o);
    DeviceTensor t({1.0f + rank, 2.0f + rank, 3.0f + rank, 4.0f + rank}, rank, {4, 1});
    hvds_handle_t hg = Enqueue(rt, HVDS_MSG_ALLGATHER, "gather", t.View(), nullptr, o);
    hvds_handle_t ha = Enqueue(rt, HVDS_MSG_ALLTOALL, "exchange", t.View(), nullptr, o);
    ranks.Sync();
    ranks.CycleUntil(rt, [&] {
      return Peek(rt, hg).status != HVDS_IN_PROGRESS && Peek(rt, ha).status != HVDS_IN_PROGRESS;
    });
    if (rank == 1) {
      EXPECT_NE(Peek(rt, hg).message.find("'gather' on rank 1: the allocator gave no GPU memory "
                                          "for the 32-byte result"),
                std::string::npos)
          << Peek(rt, hg).message;
      EXPECT_NE(Peek(rt, ha).message.find("'exchange' on rank 1: the allocator gave no GPU "
                                          "memory for the 16-byte result"),
                std::string::npos)
          << Peek(rt, ha).message;
    } else {
      ASSERT_EQ(Peek(rt, hg).status, HVDS_SUCCESS) << Peek(rt, hg).message;
      ASSERT_EQ(Peek(rt, ha).status, HVDS_SUCCESS) << Peek(rt, ha).message;
      EXPECT_EQ(DeviceTensor::ReadAt(Output(rt, hg).data, 8),
                (std::vector<float>{1, 2, 3, 4, 2, 3, 4, 5}));
      EXPECT_EQ(DeviceTensor::ReadAt(Output(rt, ha).data, 4), (std::vector<float>{1, 2, 2, 3}));
    }
    hvds__release(rt, hg);
    hvds__release(rt, ha);
  });
}

TEST(DeviceStaging, AnUnknownGpuOperationsValueIsRefused) {
  KnobOverride knob(HVDS_PARAM_GPU_OPERATIONS, "mpi");
  EXPECT_EQ(Refusal(HVDS_MSG_ALLREDUCE, "Allreduce", "w"),
            std::make_pair(HVDS_INVALID_ARGUMENT,
                           std::string("GPU_OPERATIONS=mpi is not one of host, nccl, auto "
                                       "(tensor 'w')")));
}

// A training step's gradients are all in flight at once: the next step reuses their pinned
// buffers instead of asking for new ones.
TEST(DeviceStaging, TheNextStepReusesTheStepsPinnedBuffers) {
  InstanceRanks ranks(2);
  std::vector<long> allocs;
  ranks.Run([&](int rank, hvds_runtime_t* rt) {
    std::vector<std::unique_ptr<DeviceTensor>> grads;
    std::vector<hvds_tensor_t> views;
    for (int i = 0; i < 40; i++) {
      grads.emplace_back(new DeviceTensor(std::vector<float>(3000, 1.0f), rank));
      views.push_back(grads.back()->View());
    }
    for (int step = 0; step < 3; step++) {
      hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
      o.name = "step";
      o.op = HVDS_AVERAGE;
      hvds_handle_t h = 0;
      ASSERT_EQ(hvds__enqueue(rt, HVDS_MSG_ALLREDUCE, "Allreduce", 40, views.data(), views.data(),
                              &o, &h),
                HVDS_SUCCESS)
          << hvds_last_error();
      Finish(ranks, rt, h, "step");
      hvds__release(rt, h);
      ranks.Sync();
      if (rank == 0) allocs.push_back(Fake::Get().stats().host_allocs);
      ranks.Sync();
    }
  });
  ASSERT_EQ(allocs.size(), 3u);
  EXPECT_EQ(allocs[2], allocs[0]) << "steps 2 and 3 asked for no new pinned memory";
}

// Many operations leave no page-locked memory behind beyond the pool's few buffers per size,
// and no GPU memory at all.
TEST(DeviceStaging, ManyOperationsKeepHostAndGpuMemoryFlat) {
  InstanceRanks ranks(2);
  fake_device_stats_t before = Fake::Get().stats();
  ranks.Run([&](int rank, hvds_runtime_t* rt) {
    DeviceTensor small({1, 2, 3}, rank), big(std::vector<float>(50000, 1.0f), rank);
    for (int i = 0; i < 300; i++) {
      const DeviceTensor& t = i % 2 ? big : small;
      std::string name = "flat." + std::to_string(i % 7);
      hvds_handle_t h = Enqueue(rt, HVDS_MSG_ALLREDUCE, name.c_str(), t.View(), nullptr);
      Finish(ranks, rt, h, name.c_str());
      hvds__release(rt, h);
    }
  });
  fake_device_stats_t after = Fake::Get().stats();
  EXPECT_LE(after.host_buffers - before.host_buffers, 8) << "the pool keeps at most 4 per size";
  EXPECT_EQ(after.device_buffers, before.device_buffers);
}

}  // namespace
