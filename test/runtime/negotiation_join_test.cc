// Join with ranks as threads: a joined rank contributes zeros to the allreduces the others still
// run (decided at rank 0, or straight from the cache), the JOIN that ends it carries the last rank
// that joined, and operations Join does not support fail with Horovod's message.
#include <gtest/gtest.h>

#include <vector>

#include "handle.h"
#include "instance_ranks.h"

namespace {

using namespace hvds_test;  // the harness (instance_ranks.h)

// Ranks 0 and 2 have joined, rank 1 allreduces g: the result is rank 1's own values. Rank 1
// then joins last, and every rank's join completes naming it.
void RankOneAllreducesAlone(InstanceRanks& ranks, int rank, hvds_runtime_t* rt, int cycles) {
  std::vector<float> g = {1.0f, 2.0f, 3.0f};
  hvds_handle_t h = rank == 1 ? Submit(rt, HVDS_MSG_ALLREDUCE, "g", Tensor(g)) : Join(rt);
  ranks.Sync();
  for (int i = 0; i < cycles; i++) ranks.Cycle(rt);
  if (rank == 1) {
    EXPECT_EQ(Peek(rt, h).status, HVDS_SUCCESS) << Peek(rt, h).message;
    EXPECT_EQ(g, std::vector<float>({1.0f, 2.0f, 3.0f}));  // zeros from the joined ranks
    hvds__release(rt, h);
    h = Join(rt);
  } else {
    EXPECT_EQ(Peek(rt, h).status, HVDS_IN_PROGRESS);  // not every rank has joined yet
  }
  ranks.Sync();
  ranks.Cycle(rt);
  EXPECT_EQ(Peek(rt, h).status, HVDS_SUCCESS) << Peek(rt, h).message;
  EXPECT_EQ(Peek(rt, h).join_rank, 1);
  hvds__release(rt, h);
}

TEST(NegotiationJoin, JoinedRanksContributeZerosAtRankZero) {
  InstanceRanks ranks(3);
  ranks.Run([&](int rank, hvds_runtime_t* rt) {
    RankOneAllreducesAlone(ranks, rank, rt, 1);  // one slow round: the joins and g together
    EXPECT_EQ(rt->psets[0]->cache_hits, 0u);
  });
}

TEST(NegotiationJoin, JoinedRanksContributeZerosFromTheCache) {
  InstanceRanks ranks(3);
  ranks.Run([&](int rank, hvds_runtime_t* rt) {
    std::vector<float> g(3, 1.0f);
    AllreduceInOneCycle(ranks, rt, "g", g);  // cached everywhere
    // The first cycle carries the joins to rank 0; in the second the joined ranks agree to g.
    RankOneAllreducesAlone(ranks, rank, rt, 2);
    EXPECT_EQ(rt->psets[0]->cache_hits, 1u);
    std::vector<float> after(2, 1.0f);  // joins are over: every rank contributes again
    AllreduceInOneCycle(ranks, rt, "after", after);
    EXPECT_EQ(after, std::vector<float>(2, 3.0f));
  });
}

TEST(NegotiationJoin, BroadcastWhileARankHasJoinedFails) {
  InstanceRanks ranks(2);
  ranks.Run([&](int rank, hvds_runtime_t* rt) {
    std::vector<float> b(4, 9.0f);
    hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
    o.root_rank = 1;
    hvds_handle_t h = rank == 1 ? Submit(rt, HVDS_MSG_BROADCAST, "b", Tensor(b), o) : Join(rt);
    ranks.Sync();
    ranks.Cycle(rt);
    if (rank == 1) {
      EXPECT_EQ(Peek(rt, h).status, HVDS_PRECONDITION_ERROR);
      EXPECT_EQ(Peek(rt, h).message,
                "Broadcast is not supported with Join at this time. [tensor: b]");
      hvds__release(rt, h);
      h = Join(rt);
    }
    ranks.Sync();
    ranks.Cycle(rt);
    EXPECT_EQ(Peek(rt, h).status, HVDS_SUCCESS) << Peek(rt, h).message;
    EXPECT_EQ(Peek(rt, h).join_rank, 1);
    hvds__release(rt, h);
  });
}

}  // namespace
