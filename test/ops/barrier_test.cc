// Dissemination barrier: nobody leaves round k before everybody entered it.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "inproc_p2p.h"
#include "test_util.h"

class BarrierTest : public ::testing::TestWithParam<int> {};

TEST_P(BarrierTest, NobodyLeavesEarly) {
  int n = GetParam();
  const int rounds = 20;
  std::vector<std::atomic<int>> arrived(rounds);
  for (auto& a : arrived) a = 0;
  auto world = inproc_world(n);
  inproc_spawn(world, [&](hvds_p2p_t* p) {
    for (int k = 0; k < rounds; k++) {
      if ((p->rank + k) % 3 == 0) std::this_thread::yield();  // vary arrival order
      arrived[k]++;
      hvds_coll_opts_t o = {static_cast<uint64_t>(k), HVDS_ALGO_AUTO, 0, 0};
      ASSERT_EQ(hvds__barrier(p, &o), HVDS_SUCCESS) << p->error;
      ASSERT_EQ(arrived[k].load(), n) << "rank " << p->rank << " left round " << k << " early";
    }
  });
  EXPECT_EQ(inproc_pending_messages(world.get()), 0u);
}

INSTANTIATE_TEST_SUITE_P(Ranks, BarrierTest, ::testing::Range(1, 9));
