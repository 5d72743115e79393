// The stall inspector with ranks as threads (stall.c): with small stall times, a tensor one rank
// never submits is reported with that rank and the tensor's name, and after the shutdown time it
// fails on the ranks that submitted it; the runtime goes on.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "handle.h"
#include "instance_ranks.h"

namespace {

using namespace hvds_test;  // the harness (instance_ranks.h)

TEST(NegotiationStall, MissingRankNamedThenTensorFails) {
  KnobOverride warn(HVDS_PARAM_STALL_CHECK_TIME_SECONDS, "0.2");
  KnobOverride stop(HVDS_PARAM_STALL_SHUTDOWN_TIME_SECONDS, "0.4");
  InstanceRanks ranks(3);
  ranks.Run([&](int rank, hvds_runtime_t* rt) {
    std::vector<float> v(4, 1.0f);
    hvds_handle_t h = rank == 1 ? 0 : Submit(rt, HVDS_MSG_ALLREDUCE, "t", Tensor(v));
    ranks.Sync();
    ranks.CycleUntil(rt, [&] { return rank == 1 || Done(rt, h); });
    if (rank != 1) {
      hvds_test::Outcome out = Peek(rt, h);
      EXPECT_EQ(out.status, HVDS_PRECONDITION_ERROR);
      EXPECT_NE(out.message.find("waiting for remainder of ranks"), std::string::npos)
          << out.message;
      EXPECT_NE(out.message.find("\nMissing ranks:\n1: [t]\nOne or more rank"), std::string::npos)
          << out.message;  // rank 1 alone is missing
      EXPECT_NE(out.message.find("Will shutdown."), std::string::npos) << out.message;
      EXPECT_EQ(v, std::vector<float>(4, 1.0f));  // nothing ran
      hvds__release(rt, h);
    }
    std::vector<float> after(2, 1.0f);
    AllreduceInOneCycle(ranks, rt, "after", after);
    EXPECT_EQ(after, std::vector<float>(2, 3.0f));
  });
}

}  // namespace
