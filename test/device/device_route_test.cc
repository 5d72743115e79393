// GPU allreduces run by the device library's NCCL route (runtime/device_route.h,
// HVDSPARSE_GPU_OPERATIONS=nccl), over the fake library: its "NCCL" reduces the ranks' fake GPU
// memory on a completion thread of its own. Control flow only: fused launches, ready events on
// the producer's stream, completion off the cycle's thread, failures on every rank, joined
// ranks, communicators and events freed. NCCL itself is checked by `make test-gpu`.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "device_completion.h"
#include "gpu_tensors.h"

namespace {

using namespace hvds_test;  // NOLINT: the shared helpers of gpu_tensors.h

// Waits without running any cycle until h is done: only the library's thread can finish it.
bool DoneWithoutCycles(hvds_runtime_t* rt, hvds_handle_t h, double limit_s = 10.0) {
  double start = hvds__now();
  while (Peek(rt, h).status == HVDS_IN_PROGRESS) {
    if (hvds__now() - start > limit_s) return false;
    usleep(1000);
  }
  return true;
}

TEST(DeviceRoute, AFusedAllreduceIsOneLaunchAndCompletesFromTheLibrarysThread) {
  KnobOverride nccl(HVDS_PARAM_GPU_OPERATIONS, "nccl");
  fake_device_stats_t copies = Fake::Get().stats();
  fake_route_stats_t before = Fake::Get().route_stats();
  auto ranks = std::make_unique<InstanceRanks>(2);
  ranks->Run([&](int rank, hvds_runtime_t* rt) {
    DeviceTensor a({1.0f + rank, 2.0f}, rank), b({4.0f, 8.0f * (rank + 1), 1.0f}, rank),
        c({10.0f * rank}, rank);
    hvds_tensor_t in[3] = {a.View(), b.View(), c.View()};
    hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
    o.name = "grads";
    o.op = HVDS_AVERAGE;
    o.prescale = 2.0;
    o.postscale = 0.5;
    o.stream = 900 + rank;
    if (rank == 0) Fake::Get().hold(1);
    ranks->Sync();
    hvds_handle_t h = 0;
    ASSERT_EQ(hvds__enqueue(rt, HVDS_MSG_ALLREDUCE, "Allreduce", 3, in, in, &o, &h), HVDS_SUCCESS)
        << hvds_last_error();
    EXPECT_EQ(Fake::Get().route_stats().last_event_stream / 100, 9);  // on the producer's stream
    ranks->Sync();
    ranks->CycleUntil(rt, [&] { return Fake::Get().route_stats().calls - before.calls == 2; });
    fake_route_stats_t launched = Fake::Get().route_stats();
    EXPECT_EQ(launched.last_call_tensors, 3) << "one launch for the fused tensors";
    EXPECT_EQ(launched.last_call_ready_events, 3);
    EXPECT_EQ(Peek(rt, h).status, HVDS_IN_PROGRESS) << "held in the library: not done yet";
    ranks->Sync();
    if (rank == 0) Fake::Get().hold(0);
    EXPECT_TRUE(DoneWithoutCycles(rt, h)) << "the library's completion finishes the handle";
    EXPECT_EQ(Peek(rt, h).status, HVDS_SUCCESS) << Peek(rt, h).message;
    // The mean of the prescaled inputs, postscaled, in the ranks' own GPU memory.
    EXPECT_EQ(a.Read(), (std::vector<float>{1.5f, 2.0f}));
    EXPECT_EQ(b.Read(), (std::vector<float>{4.0f, 12.0f, 1.0f}));
    EXPECT_EQ(c.Read(), (std::vector<float>{5.0f}));
    hvds__release(rt, h);
  });
  ranks.reset();  // closes the runtimes
  fake_device_stats_t after = Fake::Get().stats();
  EXPECT_EQ(after.copies_to_host, copies.copies_to_host) << "nothing was staged";
  EXPECT_EQ(after.copies_to_device, copies.copies_to_device);
  EXPECT_EQ(Fake::Get().route_stats().comms, before.comms) << "communicators freed at close";
}

// HOROVOD_ENABLE_ASYNC_COMPLETION: the handle completes at launch, the GPU still holding the
// work; the consumer's stream is made to wait for it (the host does not), and the result lands.
TEST(DeviceRoute, AsyncCompletionFinishesAtLaunchAndTheConsumersStreamWaits) {
  KnobOverride nccl(HVDS_PARAM_GPU_OPERATIONS, "nccl");
  KnobOverride async(HVDS_PARAM_ENABLE_ASYNC_COMPLETION, "1");
  fake_route_stats_t before = Fake::Get().route_stats();
  {
    InstanceRanks ranks(2);
    ranks.Run([&](int rank, hvds_runtime_t* rt) {
      DeviceTensor a({1.0f + rank, 2.0f}, rank), b({5.0f * rank}, rank);
      hvds_tensor_t in[2] = {a.View(), b.View()};
      hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
      o.name = "grads";
      if (rank == 0) Fake::Get().hold(1);
      ranks.Sync();
      hvds_handle_t h = 0;
      ASSERT_EQ(hvds__enqueue(rt, HVDS_MSG_ALLREDUCE, "Allreduce", 2, in, in, &o, &h), HVDS_SUCCESS)
          << hvds_last_error();
      EXPECT_EQ(hvds__handle_gpu_work(rt, h), -1) << "not done yet: nothing to wait for";
      ranks.CycleUntil(rt, [&] { return Peek(rt, h).status != HVDS_IN_PROGRESS; });
      EXPECT_EQ(Peek(rt, h).status, HVDS_SUCCESS) << Peek(rt, h).message;
      EXPECT_EQ(Fake::Get().route_stats().rounds, before.rounds) << "done while the GPU holds it";
      EXPECT_EQ(hvds__handle_gpu_work(rt, h), rank);
      EXPECT_EQ(hvds__handle_stream_wait(rt, h, 4200 + rank), HVDS_SUCCESS) << hvds_last_error();
      fake_route_stats_t waited = Fake::Get().route_stats();
      EXPECT_EQ(waited.last_wait_stream / 100, 42) << "the consumer's stream";
      EXPECT_EQ(waited.last_wait_pending, 1) << "the stream waits for the GPU, not the host";
      ranks.Sync();
      if (rank == 0) Fake::Get().hold(0);
      double start = hvds__now();
      while (Fake::Get().route_stats().rounds == before.rounds && hvds__now() - start < 10)
        usleep(1000);
      EXPECT_EQ(a.Read(), (std::vector<float>{3.0f, 4.0f}));
      EXPECT_EQ(b.Read(), (std::vector<float>{5.0f}));
      hvds__release(rt, h);
      ranks.Sync();
    });
  }
  fake_route_stats_t after = Fake::Get().route_stats();
  EXPECT_EQ(after.stream_waits - before.stream_waits, 2);
  EXPECT_EQ(after.events, before.events) << "the handles' events freed at release";
}

// HOROVOD_HIERARCHICAL_ALLREDUCE=1 on 2 hosts of 2 ranks: the global set's GPU allreduces run
// on a pair of the host's and the hosts' communicators (a host's sum, then the hosts'),
// averaged over all 4 ranks; a process set's allreduce stays flat.
TEST(DeviceRoute, HierarchicalAllreduceOnTheHostsAndAcrossThem) {
  KnobOverride nccl(HVDS_PARAM_GPU_OPERATIONS, "nccl");
  fake_route_stats_t before = Fake::Get().route_stats();
  {
    InstanceRanks ranks(4, {{0, 2}});
    ranks.PlaceOnHosts(2, true);
    ranks.Run([&](int rank, hvds_runtime_t* rt) {
      DeviceTensor a({1.0f * (rank + 1), 10.0f}, rank), b({100.0f * rank}, rank);
      hvds_tensor_t in[2] = {a.View(), b.View()};
      hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
      o.name = "grads";
      o.op = HVDS_AVERAGE;
      o.postscale = 2.0;
      hvds_handle_t h = 0;
      ASSERT_EQ(hvds__enqueue(rt, HVDS_MSG_ALLREDUCE, "Allreduce", 2, in, in, &o, &h), HVDS_SUCCESS)
          << hvds_last_error();
      Finish(ranks, rt, h, "grads");
      hvds__release(rt, h);
      EXPECT_EQ(a.Read(), (std::vector<float>{5.0f, 20.0f})) << "2 x the mean of 1..4 and 10";
      EXPECT_EQ(b.Read(), (std::vector<float>{300.0f}));
      // The set {0, 2}: flat on its own communicator (ranks 1 and 3 cycle along).
      bool member = rank % 2 == 0;
      DeviceTensor c({1.0f + rank}, rank);
      hvds_op_options_t oc = HVDS_OP_OPTIONS_INIT;
      oc.process_set = 1;
      hvds_handle_t hc = member ? Enqueue(rt, HVDS_MSG_ALLREDUCE, "set", c.View(), nullptr, oc) : 0;
      ranks.CycleUntil(rt, [&] { return !member || Peek(rt, hc).status != HVDS_IN_PROGRESS; });
      if (member) {
        EXPECT_EQ(Peek(rt, hc).status, HVDS_SUCCESS) << Peek(rt, hc).message;
        EXPECT_EQ(c.Read(), (std::vector<float>{4.0f}));
        hvds__release(rt, hc);
      }
    });
  }
  fake_route_stats_t after = Fake::Get().route_stats();
  EXPECT_EQ(after.pair_calls - before.pair_calls, 4) << "each rank's global allreduce";
  EXPECT_EQ(after.calls - before.calls, 6) << "4 hierarchical, 2 in the set";
  EXPECT_EQ(after.comms, before.comms) << "the pairs' parts freed at close";
}

// DeAR's collectives on the route: an allgather of uneven first dimensions and an averaged,
// prescaled reducescatter, into memory of the caller's GPU allocator, with nothing staged.
TEST(DeviceRoute, AllgatherAndReducescatterRunOnTheRoute) {
  KnobOverride nccl(HVDS_PARAM_GPU_OPERATIONS, "nccl");
  fake_device_stats_t copies = Fake::Get().stats();
  fake_route_stats_t before = Fake::Get().route_stats();
  InstanceRanks ranks(3);
  ranks.Run([&](int rank, hvds_runtime_t* rt) {
    GpuAllocator gpu{rank, {}};
    std::vector<float> rows;
    for (int i = 0; i < 2 * (rank + 1); i++) rows.push_back(10.0f * rank + i);
    DeviceTensor g(rows, rank, {rank + 1, 2});
    hvds_op_options_t og = HVDS_OP_OPTIONS_INIT;
    gpu.Use(og);
    hvds_handle_t hg = Enqueue(rt, HVDS_MSG_ALLGATHER, "gather", g.View(), nullptr, og);
    // 7 rows of 1: blocks of 3, 2, 2 rows.
    DeviceTensor r({1, 2, 3, 4, 5, 6, 7.0f * (rank + 1)}, rank, {7, 1});
    hvds_op_options_t orr = HVDS_OP_OPTIONS_INIT;
    orr.op = HVDS_AVERAGE;
    orr.prescale = 2.0;
    gpu.Use(orr);
    hvds_handle_t hr = Enqueue(rt, HVDS_MSG_REDUCESCATTER, "rscatter", r.View(), nullptr, orr);
    ranks.Sync();
    Finish(ranks, rt, hg, "gather");
    Finish(ranks, rt, hr, "rscatter");
    hvds_tensor_t go = Output(rt, hg), ro = Output(rt, hr);
    EXPECT_EQ(go.device, rank);
    EXPECT_EQ(ro.device, rank);
    EXPECT_EQ(go.shape[0], 6);
    EXPECT_EQ(DeviceTensor::ReadAt(go.data, Elements(go)),
              (std::vector<float>{0, 1, 10, 11, 12, 13, 20, 21, 22, 23, 24, 25}));
    std::vector<std::vector<float>> want = {{2, 4, 6}, {8, 10}, {12, 28}};  // 2 x mean
    EXPECT_EQ(DeviceTensor::ReadAt(ro.data, Elements(ro)), want[rank]);
    hvds__release(rt, hg);
    hvds__release(rt, hr);
  });
  EXPECT_EQ(Fake::Get().stats().copies_to_host, copies.copies_to_host) << "nothing was staged";
  EXPECT_EQ(Fake::Get().route_stats().calls - before.calls, 6) << "2 launches on each rank";
}

TEST(DeviceRoute, AnNcclFailureOnOneRankFailsEveryRankNamingIt) {
  KnobOverride nccl(HVDS_PARAM_GPU_OPERATIONS, "nccl");
  InstanceRanks ranks(2);
  ranks.Run([&](int rank, hvds_runtime_t* rt) {
    if (rank == 0) Fake::Get().fail_route(1);
    ranks.Sync();
    DeviceTensor t({1, 2}, rank);
    hvds_handle_t h = Enqueue(rt, HVDS_MSG_ALLREDUCE, "grad.fc1", t.View(), nullptr);
    ranks.Sync();
    ranks.CycleUntil(rt, [&] { return Peek(rt, h).status != HVDS_IN_PROGRESS; });
    EXPECT_EQ(Peek(rt, h).status, HVDS_SYSTEM_ERROR);
    EXPECT_EQ(Peek(rt, h).message,
              "NCCL allreduce on rank " + std::to_string(rank) +
                  ": fake NCCL: unhandled cuda error (injected) on rank 1 of the communicator; it "
                  "was aborted");
    hvds__release(rt, h);
    ranks.Sync();
    if (rank == 0) Fake::Get().fail_route(-2);
  });
}

// Broadcast and alltoall on the route at np 3: a broadcast from rank 1 in place, and an
// alltoall of uneven splits into memory of the caller's GPU allocator, the received splits in
// the handle, nothing staged.
TEST(DeviceRoute, BroadcastAndAlltoallRunOnTheRoute) {
  KnobOverride nccl(HVDS_PARAM_GPU_OPERATIONS, "nccl");
  fake_device_stats_t copies = Fake::Get().stats();
  fake_route_stats_t before = Fake::Get().route_stats();
  InstanceRanks ranks(3);
  ranks.Run([&](int rank, hvds_runtime_t* rt) {
    GpuAllocator gpu{rank, {}};
    DeviceTensor b({1.0f + rank, 10.0f * rank}, rank);
    hvds_op_options_t ob = HVDS_OP_OPTIONS_INIT;
    ob.root_rank = 1;
    hvds_tensor_t bv = b.View();
    hvds_handle_t hb = Enqueue(rt, HVDS_MSG_BROADCAST, "bcast", bv, &bv, ob);
    // Rank q sends q + 1 rows to rank 0, none to rank 1 and one to rank 2; a row is 2 floats,
    // 100 * q + its index in q's tensor.
    std::vector<float> rows;
    for (int i = 0; i < 2 * (rank + 2); i++) rows.push_back(100.0f * rank + i);
    DeviceTensor a(rows, rank, {rank + 2, 2});
    int32_t splits[3] = {rank + 1, 0, 1};
    hvds_op_options_t oa = HVDS_OP_OPTIONS_INIT;
    oa.splits = splits;
    oa.nsplits = 3;
    gpu.Use(oa);
    hvds_handle_t ha = Enqueue(rt, HVDS_MSG_ALLTOALL, "exchange", a.View(), nullptr, oa);
    ranks.Sync();
    Finish(ranks, rt, hb, "bcast");
    Finish(ranks, rt, ha, "exchange");
    EXPECT_EQ(b.Read(), (std::vector<float>{2.0f, 10.0f})) << "rank 1's tensor";
    hvds_tensor_t ao = Output(rt, ha);
    EXPECT_EQ(ao.device, rank);
    EXPECT_NE(std::find(gpu.given.begin(), gpu.given.end(), ao.data), gpu.given.end());
    std::vector<std::vector<float>> want = {
        {0, 1, 100, 101, 102, 103, 200, 201, 202, 203, 204, 205}, {}, {2, 3, 104, 105, 206, 207}};
    EXPECT_EQ(ao.shape[0], (int64_t)want[rank].size() / 2);
    EXPECT_EQ(DeviceTensor::ReadAt(ao.data, Elements(ao)), want[rank]);
    std::vector<std::vector<int32_t>> want_splits = {{1, 2, 3}, {0, 0, 0}, {1, 1, 1}};
    EXPECT_EQ(RecvSplits(rt, ha), want_splits[rank]);
    hvds__release(rt, hb);
    hvds__release(rt, ha);
  });
  EXPECT_EQ(Fake::Get().stats().copies_to_host, copies.copies_to_host) << "nothing was staged";
  EXPECT_EQ(Fake::Get().route_stats().calls - before.calls, 6) << "2 launches on each rank";
}

// A GPU allocation that fails on one rank (the caller's allocator returns NULL for a routed
// allgather, reducescatter and alltoall): that rank still takes part in the library's scratch,
// so the others get their results, and its own operations fail with the reason; the route
// works on after it.
TEST(DeviceRoute, AFailedOutputAllocationFailsThatRanksOperationOnly) {
  KnobOverride nccl(HVDS_PARAM_GPU_OPERATIONS, "nccl");
  InstanceRanks ranks(2);
  ranks.Run([&](int rank, hvds_runtime_t* rt) {
    GpuAllocator gpu{rank, {}};
    hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
    if (rank == 1) {
      o.alloc = [](void*, hvds_dtype_t, int32_t, const int64_t*, size_t) -> void* {
        return nullptr;
      };
    } else {
      gpu.Use(o);
    }
    DeviceTensor t({1.0f + rank, 2.0f + rank, 3.0f + rank, 4.0f + rank}, rank, {4, 1});
    hvds_handle_t hg = Enqueue(rt, HVDS_MSG_ALLGATHER, "gather", t.View(), nullptr, o);
    hvds_handle_t hr = Enqueue(rt, HVDS_MSG_REDUCESCATTER, "rscatter", t.View(), nullptr, o);
    hvds_handle_t ha = Enqueue(rt, HVDS_MSG_ALLTOALL, "exchange", t.View(), nullptr, o);
    ranks.Sync();
    ranks.CycleUntil(rt, [&] {
      return Peek(rt, hg).status != HVDS_IN_PROGRESS && Peek(rt, hr).status != HVDS_IN_PROGRESS &&
             Peek(rt, ha).status != HVDS_IN_PROGRESS;
    });
    const char* what[3] = {"allgather", "reducescatter", "alltoall"};
    const char* names[3] = {"gather", "rscatter", "exchange"};
    const char* bytes[3] = {"32", "8", "16"};
    hvds_handle_t hs[3] = {hg, hr, ha};
    for (int i = 0; i < 3; i++) {
      if (rank == 1) {
        EXPECT_NE(Peek(rt, hs[i]).status, HVDS_SUCCESS) << what[i];
        EXPECT_NE(Peek(rt, hs[i]).message.find(std::string(what[i]) + " '" + names[i] +
                                               "' on rank 1: the output allocator returned NULL "
                                               "for " +
                                               bytes[i] + " bytes on GPU 1"),
                  std::string::npos)
            << Peek(rt, hs[i]).message;
      } else {
        EXPECT_EQ(Peek(rt, hs[i]).status, HVDS_SUCCESS)
            << what[i] << ": " << Peek(rt, hs[i]).message;
      }
    }
    if (rank == 0) {
      EXPECT_EQ(DeviceTensor::ReadAt(Output(rt, hg).data, 8),
                (std::vector<float>{1, 2, 3, 4, 2, 3, 4, 5}));
      EXPECT_EQ(DeviceTensor::ReadAt(Output(rt, hr).data, 2), (std::vector<float>{3, 5}));
      EXPECT_EQ(DeviceTensor::ReadAt(Output(rt, ha).data, 4), (std::vector<float>{1, 2, 2, 3}));
    }
    for (hvds_handle_t h : hs) hvds__release(rt, h);
    ranks.Sync();
    DeviceTensor after({1.0f, 1.0f}, rank);  // the route still works
    hvds_handle_t h = Enqueue(rt, HVDS_MSG_ALLREDUCE, "after", after.View(), nullptr);
    ranks.Sync();
    Finish(ranks, rt, h, "after");
    EXPECT_EQ(after.Read(), (std::vector<float>{2, 2}));
    hvds__release(rt, h);
  });
}

// Adasum has no NCCL reduction: staged under nccl, and right.
TEST(DeviceRoute, AdasumIsStaged) {
  KnobOverride nccl(HVDS_PARAM_GPU_OPERATIONS, "nccl");
  fake_device_stats_t copies = Fake::Get().stats();
  fake_route_stats_t before = Fake::Get().route_stats();
  InstanceRanks ranks(2);
  ranks.Run([&](int rank, hvds_runtime_t* rt) {
    // Orthogonal gradients: Adasum adds them.
    DeviceTensor t(rank == 0 ? std::vector<float>{1, 0} : std::vector<float>{0, 2}, rank);
    hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
    o.op = HVDS_ADASUM;
    Finish(ranks, rt, Enqueue(rt, HVDS_MSG_ALLREDUCE, "adasum", t.View(), nullptr, o), "adasum");
    EXPECT_EQ(t.Read(), (std::vector<float>{1, 2}));
  });
  EXPECT_EQ(Fake::Get().stats().copies_to_host - copies.copies_to_host, 2) << "staged";
  EXPECT_EQ(Fake::Get().route_stats().calls, before.calls) << "not routed";
}

TEST(DeviceRoute, AJoinedRankAddsZerosOnItsGpu) {
  KnobOverride nccl(HVDS_PARAM_GPU_OPERATIONS, "nccl");
  InstanceRanks ranks(2);
  ranks.Run([&](int rank, hvds_runtime_t* rt) {
    // Rank 1 runs one routed allreduce (its GPU context), then joins; rank 0 reduces alone.
    DeviceTensor t({3.0f, 4.0f}, rank);
    Finish(ranks, rt, Enqueue(rt, HVDS_MSG_ALLREDUCE, "warm", t.View(), nullptr), "warm");
    EXPECT_EQ(t.Read(), (std::vector<float>{6.0f, 8.0f}));
    hvds_op_options_t twice = HVDS_OP_OPTIONS_INIT;
    twice.prescale = 2.0;  // so that a result left untouched shows
    hvds_handle_t h =
        rank == 0 ? Enqueue(rt, HVDS_MSG_ALLREDUCE, "alone", t.View(), nullptr, twice) : Join(rt);
    ranks.Sync();
    ranks.CycleUntil(rt, [&] { return rank == 1 || Peek(rt, h).status != HVDS_IN_PROGRESS; });
    if (rank == 0) {
      EXPECT_EQ(Peek(rt, h).status, HVDS_SUCCESS) << Peek(rt, h).message;
      EXPECT_EQ(t.Read(), (std::vector<float>{12.0f, 16.0f})) << "twice its own, plus zeros";
    }
    hvds_handle_t j = rank == 0 ? Join(rt) : h;
    ranks.Sync();
    ranks.CycleUntil(rt, [&] { return Peek(rt, j).status != HVDS_IN_PROGRESS; });
    EXPECT_EQ(Peek(rt, j).status, HVDS_SUCCESS) << Peek(rt, j).message;
    if (rank == 0) hvds__release(rt, h);
    hvds__release(rt, j);
  });
}

TEST(DeviceRoute, ManyOperationsLeaveNoEventsOrCommunicatorsBehind) {
  KnobOverride nccl(HVDS_PARAM_GPU_OPERATIONS, "nccl");
  fake_route_stats_t before = Fake::Get().route_stats();
  {
    InstanceRanks ranks(2);
    ranks.Run([&](int rank, hvds_runtime_t* rt) {
      DeviceTensor t(std::vector<float>(1000, 1.0f + rank), rank);
      hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
      o.op = HVDS_AVERAGE;
      for (int i = 0; i < 200; i++) {
        std::string name = "many." + std::to_string(i % 5);
        hvds_handle_t h = Enqueue(rt, HVDS_MSG_ALLREDUCE, name.c_str(), t.View(), nullptr, o);
        Finish(ranks, rt, h, name.c_str());
        hvds__release(rt, h);
      }
      EXPECT_EQ(t.Read(), std::vector<float>(1000, 1.5f)) << "the mean, kept by every average";
    });
  }
  fake_route_stats_t after = Fake::Get().route_stats();
  EXPECT_EQ(after.calls - before.calls, 400);
  EXPECT_EQ(after.events, before.events) << "every ready event freed";
  EXPECT_EQ(after.comms, before.comms) << "every communicator freed";
}

// NCCL has no 16-bit integers: such GPU allreduces are staged, and right.
TEST(DeviceRoute, SixteenBitIntegersAreStaged) {
  KnobOverride nccl(HVDS_PARAM_GPU_OPERATIONS, "nccl");
  fake_device_stats_t copies = Fake::Get().stats();
  fake_route_stats_t before = Fake::Get().route_stats();
  InstanceRanks ranks(2);
  ranks.Run([&](int rank, hvds_runtime_t* rt) {
    int16_t v[3] = {(int16_t)(1 + rank), -2, 300};
    void* p = Fake::Get().alloc(sizeof(v), rank);
    Fake::Get().write(p, v, sizeof(v));
    hvds_tensor_t t = {p, HVDS_INT16, rank, 1, {3}};
    Finish(ranks, rt, Enqueue(rt, HVDS_MSG_ALLREDUCE, "counts", t, nullptr), "counts");
    Fake::Get().read(v, p, sizeof(v));
    EXPECT_EQ(std::vector<int16_t>(v, v + 3), (std::vector<int16_t>{3, -4, 600}));
    Fake::Get().free(p);
  });
  EXPECT_EQ(Fake::Get().stats().copies_to_host - copies.copies_to_host, 2) << "staged";
  EXPECT_EQ(Fake::Get().route_stats().calls, before.calls) << "not routed";
}

// Horovod's HOROVOD_GPU_OPERATIONS (its build's NCCL or MPI, often left set) selects nothing.
TEST(DeviceRoute, HorovodsBuildTimeVariableLeavesGpuTensorsStaged) {
  setenv("HOROVOD_GPU_OPERATIONS", "NCCL", 1);
  hvds__param_reload();
  fake_device_stats_t copies = Fake::Get().stats();
  fake_route_stats_t before = Fake::Get().route_stats();
  {
    InstanceRanks ranks(1);
    ranks.Run([&](int, hvds_runtime_t* rt) {
      DeviceTensor t({1, 2}, 0);
      Finish(ranks, rt, Enqueue(rt, HVDS_MSG_ALLREDUCE, "w", t.View(), nullptr), "w");
    });
  }
  unsetenv("HOROVOD_GPU_OPERATIONS");
  hvds__param_reload();
  EXPECT_EQ(Fake::Get().stats().copies_to_host - copies.copies_to_host, 1) << "staged";
  EXPECT_EQ(Fake::Get().route_stats().calls, before.calls) << "not routed";
}

// hvds_shutdown with an allreduce still on the GPU: it waits for that work, whose completion
// needs the runtime's locks, and returns (one rank, the public API).
TEST(DeviceRoute, ShutdownWaitsForGpuWorkInFlight) {
  setenv("HVDSPARSE_GPU_OPERATIONS", "nccl", 1);
  setenv("HVDSPARSE_SIZE", "1", 1);
  setenv("HVDSPARSE_RANK", "0", 1);
  setenv("HVDSPARSE_GLOO_RENDEZVOUS_ADDR", "", 1);
  ASSERT_EQ(hvds_init(), HVDS_SUCCESS) << hvds_last_error();
  fake_route_stats_t before = Fake::Get().route_stats();
  DeviceTensor t({1, 2}, 0);
  hvds_tensor_t v = t.View();
  hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
  o.name = "in_flight";
  o.prescale = 3.0;
  Fake::Get().hold(1);
  hvds_handle_t h = 0;
  ASSERT_EQ(hvds_allreduce_async(&v, &v, &o, &h), HVDS_SUCCESS) << hvds_last_error();
  double start = hvds__now();
  while (Fake::Get().route_stats().calls == before.calls && hvds__now() - start < 10) usleep(1000);
  ASSERT_EQ(Fake::Get().route_stats().calls, before.calls + 1) << "launched";
  std::thread release([] {
    usleep(200 * 1000);
    Fake::Get().hold(0);
  });
  EXPECT_EQ(hvds_shutdown(), HVDS_SUCCESS);
  release.join();
  EXPECT_EQ(t.Read(), (std::vector<float>{3, 6})) << "the work in flight finished";
  unsetenv("HVDSPARSE_GPU_OPERATIONS");
  hvds__param_reload();
}

}  // namespace
