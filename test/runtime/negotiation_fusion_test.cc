// Fusion of negotiated responses with ranks as threads: allreduces ready in the same cycle with
// the same dtype, op and scale factors go out as one response, up to the fusion threshold, from
// the slow path and from the cache alike.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "controller.h"
#include "execute.h"
#include "handle.h"
#include "instance_ranks.h"

namespace {

using namespace hvds_test;  // the harness (instance_ranks.h)

using Names = std::vector<std::string>;

// One negotiation of rt's global set, its responses run; returns each response's names, sorted,
// with the responses sorted too (their order is the runtime's, identical on every rank).
std::vector<Names> NegotiateAndRun(hvds_runtime_t* rt) {
  hvds_response_t* resps = nullptr;
  int32_t n = 0;
  int shutdown = 0;
  std::vector<Names> out;
  EXPECT_EQ(hvds__negotiate(rt->psets[0], 0, &resps, &n, &shutdown), HVDS_SUCCESS);
  for (int32_t i = 0; i < n; i++) {
    Names names(resps[i].names, resps[i].names + resps[i].nnames);
    std::sort(names.begin(), names.end());
    out.push_back(names);
    EXPECT_EQ(hvds__execute(rt->psets[0], &resps[i]), HVDS_SUCCESS);
    hvds__response_free(&resps[i]);
  }
  free(resps);
  std::sort(out.begin(), out.end());
  return out;
}

// Four-element float32 allreduces: f1..f3 alike, then one scaled and one averaged.
struct Step {
  std::vector<std::vector<float>> vs;
  std::vector<hvds_handle_t> hs;

  void Submit(hvds_runtime_t* rt, int rank) {
    vs.assign(5, std::vector<float>(4, rank + 1.0f));
    const char* names[] = {"f1", "f2", "f3", "scaled", "avg"};
    for (int i = 0; i < 5; i++) {
      hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
      if (i == 3) o.prescale = 2.0;
      if (i == 4) o.op = HVDS_AVERAGE;
      hs.push_back(hvds_test::Submit(rt, HVDS_MSG_ALLREDUCE, names[i], Tensor(vs[i]), o));
    }
  }
  void ExpectDone(hvds_runtime_t* rt) {
    for (hvds_handle_t h : hs) {
      EXPECT_EQ(Peek(rt, h).status, HVDS_SUCCESS) << Peek(rt, h).message;
      hvds__release(rt, h);
    }
    hs.clear();
    for (int i = 0; i < 3; i++) EXPECT_EQ(vs[i], std::vector<float>(4, 3.0f)) << i;
    EXPECT_EQ(vs[3], std::vector<float>(4, 6.0f));
    EXPECT_EQ(vs[4], std::vector<float>(4, 1.5f));
  }
};

TEST(NegotiationFusion, ReadyAllreducesAlikeGoOutAsOne) {
  InstanceRanks ranks(2);
  ranks.Run([&](int rank, hvds_runtime_t* rt) {
    const std::vector<Names> want = {{"avg"}, {"f1", "f2", "f3"}, {"scaled"}};
    for (int round = 0; round < 2; round++) {  // from rank 0's answers, then from the cache
      Step step;
      step.Submit(rt, rank);
      ranks.Sync();
      EXPECT_EQ(NegotiateAndRun(rt), want) << "round " << round;
      step.ExpectDone(rt);
    }
    EXPECT_EQ(Paths(rt->psets[0]), "slow 1, cached 5");
  });
}

TEST(NegotiationFusion, ThresholdBoundsABucket) {
  InstanceRanks ranks(2);
  ranks.Run([&](int rank, hvds_runtime_t* rt) {
    rt->fusion_threshold = 2 * 4 * sizeof(float);  // two of the four-element tensors
    for (int round = 0; round < 2; round++) {
      Step step;
      step.Submit(rt, rank);
      ranks.Sync();
      std::vector<Names> got = NegotiateAndRun(rt);
      size_t pairs =
          std::count_if(got.begin(), got.end(), [](const Names& n) { return n.size() == 2; });
      EXPECT_EQ(got.size(), 4u) << "round " << round;  // f's as two and one, scaled, avg
      EXPECT_EQ(pairs, 1u) << "round " << round;
      step.ExpectDone(rt);
    }
  });
}

}  // namespace
