// The ordered fast lane with ranks as threads (lane.c): operations every rank submits in the same
// order run without negotiation; where the orders differ, the operation at that position fails on
// every rank, the ones before it run, and the lanes stay aligned for what follows.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "controller.h"
#include "enqueue.h"
#include "execute.h"
#include "handle.h"
#include "lane.h"
#include "instance_ranks.h"

namespace {

using namespace hvds_test;  // the harness (instance_ranks.h)

hvds_handle_t SubmitOrdered(hvds_runtime_t* rt, const char* name, std::vector<float>& v) {
  hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
  o.ordered = 1;
  return Submit(rt, HVDS_MSG_ALLREDUCE, name, Tensor(v), o);
}

// The message of a lane whose position k holds another operation on another rank.
std::string MismatchText(int k, int rank, const char* name) {
  return "Mismatched ordered operations: ordered operation " + std::to_string(k) +
         " of process set 0 differs between ranks; rank " + std::to_string(rank) +
         " submitted ALLREDUCE '" + name +
         "' (FLOAT32, shape [4]). Ordered operations must be submitted in the same order, with "
         "the same names, dtypes, ops and shapes, on every rank.";
}

TEST(NegotiationLane, SameOrderRunsWithoutNegotiation) {
  InstanceRanks ranks(2);
  ranks.Run([&](int rank, hvds_runtime_t* rt) {
    std::vector<std::vector<float>> vs = {std::vector<float>(4, rank + 1.0f),
                                          std::vector<float>(2, 10.0f * (rank + 1)),
                                          std::vector<float>(7, 1.0f)};
    std::vector<hvds_handle_t> hs;
    for (size_t i = 0; i < vs.size(); i++)
      hs.push_back(SubmitOrdered(rt, ("op" + std::to_string(i)).c_str(), vs[i]));
    ranks.Sync();
    ranks.Cycle(rt);
    for (hvds_handle_t h : hs) {
      EXPECT_EQ(Peek(rt, h).status, HVDS_SUCCESS) << Peek(rt, h).message;
      hvds__release(rt, h);
    }
    EXPECT_EQ(vs[0], std::vector<float>(4, 3.0f));
    EXPECT_EQ(vs[1], std::vector<float>(2, 30.0f));
    EXPECT_EQ(vs[2], std::vector<float>(7, 2.0f));
    hvds_pset_t* s = rt->psets[0];
    EXPECT_EQ(Paths(s), "slow 0, cached 0");
    EXPECT_EQ(s->lane_done, 3u);
  });
}

// Rank 0 submits a, x, y and rank 1 a, y, x (same shapes): a runs, position 1 fails in the first
// cycle and position 2 in the next, on both ranks, without running; the lane then goes on.
TEST(NegotiationLane, DifferentOrderFailsThatPositionOnEveryRank) {
  InstanceRanks ranks(2);
  ranks.Run([&](int rank, hvds_runtime_t* rt) {
    const char* second = rank == 0 ? "x" : "y";
    const char* third = rank == 0 ? "y" : "x";
    std::vector<float> a(4, 1.0f), b(4, 5.0f), c(4, 7.0f);
    hvds_handle_t ha = SubmitOrdered(rt, "a", a);
    hvds_handle_t hb = SubmitOrdered(rt, second, b);
    hvds_handle_t hc = SubmitOrdered(rt, third, c);
    ranks.Sync();
    ranks.Cycle(rt);
    EXPECT_EQ(Peek(rt, ha).status, HVDS_SUCCESS);
    EXPECT_EQ(a, std::vector<float>(4, 2.0f));
    EXPECT_EQ(Peek(rt, hb).status, HVDS_PRECONDITION_ERROR);
    EXPECT_EQ(Peek(rt, hb).message, MismatchText(1, rank, second));
    EXPECT_EQ(Peek(rt, hc).status, HVDS_IN_PROGRESS);
    ranks.Cycle(rt);
    EXPECT_EQ(Peek(rt, hc).status, HVDS_PRECONDITION_ERROR);
    EXPECT_EQ(Peek(rt, hc).message, MismatchText(2, rank, third));
    EXPECT_EQ(b, std::vector<float>(4, 5.0f));  // nothing ran for them
    EXPECT_EQ(c, std::vector<float>(4, 7.0f));
    for (hvds_handle_t h : {ha, hb, hc}) hvds__release(rt, h);

    std::vector<float> z(4, 1.0f);
    hvds_handle_t hz = SubmitOrdered(rt, "z", z);
    ranks.Sync();
    ranks.Cycle(rt);
    EXPECT_EQ(Peek(rt, hz).status, HVDS_SUCCESS) << Peek(rt, hz).message;
    EXPECT_EQ(z, std::vector<float>(4, 2.0f));
    hvds__release(rt, hz);
  });
}

// More ordered operations than a cycle runs, then a barrier: the barrier completes only after
// every one of them (it is asked for once the lane has drained up to it).
TEST(NegotiationLane, ABarrierWaitsForTheOrderedOperationsQueuedBeforeIt) {
  InstanceRanks ranks(2);
  ranks.Run([&](int rank, hvds_runtime_t* rt) {
    const int count = 2 * HVDS_LANE_MAX + 3;
    std::vector<std::vector<float>> vs(count, std::vector<float>(4, rank + 1.0f));
    std::vector<hvds_handle_t> hs;
    for (int i = 0; i < count; i++)
      hs.push_back(SubmitOrdered(rt, ("lane" + std::to_string(i)).c_str(), vs[i]));
    hvds_handle_t b = 0;
    ASSERT_EQ(hvds__enqueue_control(rt, HVDS_MSG_BARRIER, "Barrier", "barrier.noname", 0, 0, &b),
              HVDS_SUCCESS);
    ranks.Sync();
    int cycles = 0;
    while (!Done(rt, b) && cycles < 10) {
      hvds_response_t* resps = nullptr;
      int32_t n = 0;
      int shutdown = 0;
      ASSERT_EQ(hvds__negotiate(rt->psets[0], 0, &resps, &n, &shutdown), HVDS_SUCCESS);
      for (int32_t i = 0; i < n; i++) {
        if (resps[i].type == HVDS_MSG_BARRIER) {
          int unfinished = 0;
          for (hvds_handle_t h : hs) unfinished += !Done(rt, h);
          EXPECT_EQ(unfinished, 0) << "cycle " << cycles;
        }
        EXPECT_EQ(hvds__execute(rt->psets[0], &resps[i]), HVDS_SUCCESS);
        hvds__response_free(&resps[i]);
      }
      free(resps);
      cycles++;
    }
    EXPECT_EQ(Peek(rt, b).status, HVDS_SUCCESS) << Peek(rt, b).message;
    EXPECT_EQ(cycles, 3);  // 8, 8 and 3 ordered operations, the barrier with the last 3
    hvds__release(rt, b);
    for (int i = 0; i < count; i++) {
      EXPECT_EQ(Peek(rt, hs[i]).status, HVDS_SUCCESS) << Peek(rt, hs[i]).message;
      hvds__release(rt, hs[i]);
      EXPECT_EQ(vs[i], std::vector<float>(4, 3.0f));
    }
  });
}

}  // namespace
