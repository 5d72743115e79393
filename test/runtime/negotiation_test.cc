// The negotiation's two paths with ranks as threads: a name seen for the first time is decided
// at the set's rank 0 (slow path), the same tensor again runs from the response cache with no
// request (fast path); a changed tensor invalidates its slot on every rank; a disagreement
// reaches every rank's handle with Horovod's message.
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "controller.h"
#include "enqueue.h"
#include "execute.h"
#include "handle.h"
#include "instance_ranks.h"

namespace {

using namespace hvds_test;  // the harness (instance_ranks.h)

TEST(NegotiationPaths, FirstTimeAtRankZeroThenFromTheCache) {
  InstanceRanks ranks(3);
  ranks.Run([&](int rank, hvds_runtime_t* rt) {
    hvds_pset_t* s = rt->psets[0];
    std::vector<float> v(5, rank + 1.0f);
    AllreduceInOneCycle(ranks, rt, "grad", v);
    EXPECT_EQ(v, std::vector<float>(5, 6.0f));
    EXPECT_EQ(Paths(s), "slow 1, cached 0");
    ASSERT_NE(Cached(s, "grad"), nullptr);
    EXPECT_EQ(Cached(s, "grad")->numel, 5);

    // The same tensor again: one bit-vector agreement, no request to rank 0.
    AllreduceInOneCycle(ranks, rt, "grad", v);
    EXPECT_EQ(v, std::vector<float>(5, 18.0f));
    EXPECT_EQ(Paths(s), "slow 1, cached 1");
    EXPECT_EQ(s->table.count, 0u);  // rank 0's table saw nothing
  });
}

// A changed element count under a cached name is a new negotiation, and the slot then holds the
// new parameters.
TEST(NegotiationCache, ChangedShapeGoesThroughRankZeroAgain) {
  InstanceRanks ranks(2);
  ranks.Run([&](int rank, hvds_runtime_t* rt) {
    hvds_pset_t* s = rt->psets[0];
    std::vector<float> small(4, 1.0f), large(6, rank + 1.0f);
    AllreduceInOneCycle(ranks, rt, "w", small);
    AllreduceInOneCycle(ranks, rt, "w", large);
    EXPECT_EQ(large, std::vector<float>(6, 3.0f));
    EXPECT_EQ(Paths(s), "slow 2, cached 0");
    ASSERT_NE(Cached(s, "w"), nullptr);
    EXPECT_EQ(Cached(s, "w")->numel, 6);
  });
}

// One rank changes the tensor: the ranks whose request still hits erase the slot too (slot
// numbers must agree), everyone goes to rank 0, and the disagreement fails on both ranks.
TEST(NegotiationCache, ChangeOnOneRankInvalidatesTheSlotEverywhere) {
  InstanceRanks ranks(2);
  ranks.Run([&](int rank, hvds_runtime_t* rt) {
    hvds_pset_t* s = rt->psets[0];
    std::vector<float> v(4, 1.0f), changed(rank == 1 ? 6 : 4, 1.0f);
    AllreduceInOneCycle(ranks, rt, "w", v);
    hvds_handle_t h = Submit(rt, HVDS_MSG_ALLREDUCE, "w", Tensor(changed));
    ranks.Sync();
    ranks.Cycle(rt);
    EXPECT_EQ(Peek(rt, h).status, HVDS_PRECONDITION_ERROR);
    EXPECT_EQ(Peek(rt, h).message,
              "Mismatched ALLREDUCE tensor shapes: One rank sent a tensor of shape [4], but "
              "another rank sent a tensor of shape [6]. [tensor: w; ranks 0 and 1]");
    EXPECT_EQ(Paths(s), "slow 2, cached 0");
    EXPECT_EQ(Cached(s, "w"), nullptr);  // an error is not cached
    hvds__release(rt, h);
  });
}

// With room for two, the least recently used slot goes: a is used again after b, so c evicts b.
TEST(NegotiationCache, FullCacheEvictsTheLeastRecentlyUsed) {
  KnobOverride capacity(HVDS_PARAM_CACHE_CAPACITY, "2");
  InstanceRanks ranks(2);
  ranks.Run([&](int, hvds_runtime_t* rt) {
    hvds_pset_t* s = rt->psets[0];
    std::vector<float> v(3, 1.0f);
    for (const char* name : {"a", "b", "a", "c"}) AllreduceInOneCycle(ranks, rt, name, v);
    EXPECT_EQ(Paths(s), "slow 3, cached 1");  // a, b and c at rank 0; a again cached
    EXPECT_NE(Cached(s, "a"), nullptr);
    EXPECT_EQ(Cached(s, "b"), nullptr);
    EXPECT_NE(Cached(s, "c"), nullptr);
    AllreduceInOneCycle(ranks, rt, "b", v);
    EXPECT_EQ(Paths(s), "slow 4, cached 1");
    EXPECT_EQ(Cached(s, "a"), nullptr);  // least recently used after c's and b's rounds
  });
}

// Slots in several words of the bit vector, the last one partly used: every ready tensor runs
// from the cache in one cycle, and a slot invalidated at a word's edge is erased on every rank
// while its neighbour still runs cached.
TEST(NegotiationCache, SlotsAcrossTheBitVectorsWordsRunFromTheCache) {
  KnobOverride capacity(HVDS_PARAM_CACHE_CAPACITY, "150");
  InstanceRanks ranks(2);
  ranks.Run([&](int rank, hvds_runtime_t* rt) {
    hvds_pset_t* s = rt->psets[0];
    const int kTensors = 140;
    std::vector<std::string> names;
    for (int i = 0; i < kTensors; i++) names.push_back("t" + std::to_string(i));
    std::vector<float> one(2, 1.0f);
    for (const std::string& name : names) AllreduceInOneCycle(ranks, rt, name.c_str(), one);
    ASSERT_EQ(Paths(s), "slow 140, cached 0");

    // Every third tensor, slots 0 to 138 in three words, queued together: one cycle.
    std::vector<std::vector<float>> v;
    std::vector<int> which;
    for (int i = 0; i < kTensors; i += 3) {
      which.push_back(i);
      v.push_back(std::vector<float>(2, (float)(rank + 1) * (float)(i + 1)));
    }
    std::vector<hvds_handle_t> h;
    for (size_t k = 0; k < which.size(); k++)
      h.push_back(Submit(rt, HVDS_MSG_ALLREDUCE, names[(size_t)which[k]].c_str(), Tensor(v[k])));
    ranks.Sync();
    ranks.Cycle(rt);
    for (size_t k = 0; k < which.size(); k++) {
      Outcome out = Peek(rt, h[k]);
      EXPECT_EQ(out.status, HVDS_SUCCESS) << names[(size_t)which[k]] << ": " << out.message;
      EXPECT_EQ(v[k], std::vector<float>(2, 3.0f * (float)(which[k] + 1)))
          << names[(size_t)which[k]];
      hvds__release(rt, h[k]);
    }
    EXPECT_EQ(Paths(s), "slow 140, cached " + std::to_string(which.size()));

    // Slot 64 (first bit of the second word) changes shape on rank 1; slot 63 stays cached.
    std::vector<float> a(2, 1.0f), b(rank == 1 ? 3 : 2, 1.0f);
    hvds_handle_t ha = Submit(rt, HVDS_MSG_ALLREDUCE, "t63", Tensor(a));
    hvds_handle_t hb = Submit(rt, HVDS_MSG_ALLREDUCE, "t64", Tensor(b));
    ranks.Sync();
    ranks.Cycle(rt);
    EXPECT_EQ(Peek(rt, ha).status, HVDS_SUCCESS);
    EXPECT_EQ(a, std::vector<float>(2, 2.0f));
    EXPECT_EQ(Peek(rt, hb).status, HVDS_PRECONDITION_ERROR);
    EXPECT_EQ(Cached(s, "t64"), nullptr);
    EXPECT_NE(Cached(s, "t63"), nullptr);
    EXPECT_NE(Cached(s, "t65"), nullptr);
    hvds__release(rt, ha);
    hvds__release(rt, hb);
  });
}

// A disagreement decided at rank 0 reaches every rank's handle, and the runtime goes on.
struct Mismatch {
  const char* id;
  int32_t type;
  std::vector<int64_t> shape0, shape1;  // rank 0's and rank 1's tensors
  int32_t root1;                        // rank 1's broadcast root
  const char* message;
};

void PrintTo(const Mismatch& m, std::ostream* os) { *os << m.id; }  // names it in test listings

class NegotiationMismatch : public ::testing::TestWithParam<Mismatch> {};

TEST_P(NegotiationMismatch, FailsOnEveryRank) {
  const Mismatch& m = GetParam();
  InstanceRanks ranks(2);
  ranks.Run([&](int rank, hvds_runtime_t* rt) {
    const std::vector<int64_t>& shape = rank == 0 ? m.shape0 : m.shape1;
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v((size_t)n, 1.0f);
    hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
    o.root_rank = rank == 1 ? m.root1 : 0;
    hvds_handle_t h = Submit(rt, m.type, "x", Tensor(v, shape), o);
    ranks.Sync();
    ranks.Cycle(rt);
    EXPECT_EQ(Peek(rt, h).status, HVDS_PRECONDITION_ERROR);
    EXPECT_EQ(Peek(rt, h).message, m.message + std::string(" [tensor: x; ranks 0 and 1]"));
    hvds__release(rt, h);
    std::vector<float> after(2, 1.0f);
    AllreduceInOneCycle(ranks, rt, "after", after);
    EXPECT_EQ(after, std::vector<float>(2, 2.0f));
  });
}

const Mismatch kMismatches[] = {
    {"allreduce_shape",
     HVDS_MSG_ALLREDUCE,
     {4},
     {3},
     0,
     "Mismatched ALLREDUCE tensor shapes: One rank sent a tensor of shape [4], but another rank "
     "sent a tensor of shape [3]."},
    {"allgather_trailing_dimension",
     HVDS_MSG_ALLGATHER,
     {2, 3},
     {5, 4},
     0,
     "Mismatched ALLGATHER tensor shapes: One rank sent a tensor with dimension 1 equal to 3, but "
     "another rank sent a tensor with dimension 1 equal to 4."},
    {"reducescatter_shape",
     HVDS_MSG_REDUCESCATTER,
     {4, 2},
     {4, 1},
     0,
     "Mismatched REDUCESCATTER tensor shapes: One rank sent a tensor of shape [4, 2], but another "
     "rank sent a tensor of shape [4, 1]."},
    {"broadcast_root",
     HVDS_MSG_BROADCAST,
     {4},
     {4},
     1,
     "Mismatched BROADCAST root ranks: One rank specified root rank 0, but another rank "
     "specified root rank 1."},
};

INSTANTIATE_TEST_SUITE_P(Kinds, NegotiationMismatch, ::testing::ValuesIn(kMismatches),
                         [](const auto& info) { return std::string(info.param.id); });

// A process set's own rank 0 decides (global rank 1 here), names global ranks, and nothing of
// it reaches the global set's rank 0.
TEST(NegotiationPaths, ProcessSetDecidesAtItsOwnRankZero) {
  InstanceRanks ranks(3, {{1, 2}});
  ranks.Run([&](int rank, hvds_runtime_t* rt) {
    hvds_handle_t h = 0;
    std::vector<float> v(rank == 2 ? 3 : 2, 1.0f);
    hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
    o.process_set = 1;
    if (rank > 0) h = Submit(rt, HVDS_MSG_ALLREDUCE, "in_set", Tensor(v), o);
    ranks.Sync();
    ranks.Cycle(rt);
    EXPECT_EQ(Paths(rt->psets[0]), "slow 0, cached 0");
    if (rank == 0) return;
    EXPECT_EQ(Paths(rt->psets[1]), "slow 1, cached 0");
    EXPECT_EQ(Peek(rt, h).message,
              "Mismatched ALLREDUCE tensor shapes: One rank sent a tensor of shape [2], but "
              "another rank sent a tensor of shape [3]. [tensor: in_set; ranks 1 and 2]");
    hvds__release(rt, h);
  });
}

// Rank 0 answers in the order names become ready and every rank asks in the order it queued:
// a barrier runs after the allreduces queued before it, whatever their names (the pending
// table's own order is a hash's).
TEST(NegotiationOrder, ABarrierRunsAfterTheOperationsQueuedBeforeIt) {
  InstanceRanks ranks(3);
  ranks.Run([&](int rank, hvds_runtime_t* rt) {
    for (int round = 0; round < 20; round++) {
      std::vector<std::vector<float>> vs(1 + round % 4, std::vector<float>(4, 1.0f));
      std::vector<hvds_handle_t> hs;
      for (size_t i = 0; i < vs.size(); i++) {
        std::string name = "r" + std::to_string(round) + "." + std::to_string(i);
        hs.push_back(Submit(rt, HVDS_MSG_ALLREDUCE, name.c_str(), Tensor(vs[i])));
      }
      hvds_handle_t b = 0;
      ASSERT_EQ(hvds__enqueue_control(rt, HVDS_MSG_BARRIER, "Barrier", "barrier.noname", 0, 0, &b),
                HVDS_SUCCESS);
      ranks.Sync();
      hvds_response_t* resps = nullptr;
      int32_t n = 0;
      int shutdown = 0;
      ASSERT_EQ(hvds__negotiate(rt->psets[0], 0, &resps, &n, &shutdown), HVDS_SUCCESS);
      ASSERT_GT(n, 0);
      EXPECT_EQ(resps[n - 1].type, HVDS_MSG_BARRIER) << "round " << round;
      for (int32_t i = 0; i < n; i++) {
        EXPECT_EQ(hvds__execute(rt->psets[0], &resps[i]), HVDS_SUCCESS);
        hvds__response_free(&resps[i]);
      }
      free(resps);
      for (hvds_handle_t h : hs) {
        EXPECT_EQ(Peek(rt, h).status, HVDS_SUCCESS) << Peek(rt, h).message;
        hvds__release(rt, h);
      }
      EXPECT_EQ(Peek(rt, b).status, HVDS_SUCCESS) << Peek(rt, b).message;
      hvds__release(rt, b);
      for (const auto& v : vs) EXPECT_EQ(v, std::vector<float>(4, 3.0f));
    }
  });
}

}  // namespace
