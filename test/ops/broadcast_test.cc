// Binomial-tree broadcast from every root, single-segment and pipelined.
#include <gtest/gtest.h>

#include "inproc_p2p.h"
#include "test_util.h"

namespace {

void check_broadcast(int nranks, size_t bytes, size_t chunk) {
  auto world = inproc_world(nranks);
  inproc_spawn(world, [&](hvds_p2p_t* p) {
    for (int root = 0; root < nranks; root++) {
      std::vector<unsigned char> buf(bytes);
      for (size_t i = 0; i < bytes; i++)
        buf[i] = static_cast<unsigned char>(p->rank == root ? i * 13 + root : 0xab);
      hvds_coll_opts_t o = {static_cast<uint64_t>(root), HVDS_ALGO_AUTO, chunk, 0};
      ASSERT_EQ(hvds__broadcast(p, buf.data(), bytes, root, &o), HVDS_SUCCESS) << p->error;
      for (size_t i = 0; i < bytes; i++)
        ASSERT_EQ(buf[i], static_cast<unsigned char>(i * 13 + root))
            << "rank " << p->rank << " root " << root << " byte " << i;
    }
  });
  EXPECT_EQ(inproc_pending_messages(world.get()), 0u);
}

}  // namespace

class BroadcastTest : public ::testing::TestWithParam<int> {};

TEST_P(BroadcastTest, EveryRootEverySize) {
  int n = GetParam();
  check_broadcast(n, 0, 0);
  check_broadcast(n, 1, 0);
  check_broadcast(n, 1001, 0);
  check_broadcast(n, 1001, 100);  // 11 segments streaming down the tree
}

INSTANTIATE_TEST_SUITE_P(Ranks, BroadcastTest, ::testing::Range(1, 9));

TEST(BroadcastLarge, PipelinedAboveOneMiB) { check_broadcast(7, (3 << 20) + 5, 0); }

TEST(BroadcastArgs, BadRoot) {
  inproc_spawn(2, [](hvds_p2p_t* p) {
    char c = 0;
    EXPECT_EQ(hvds__broadcast(p, &c, 1, 2, nullptr), HVDS_INVALID_ARGUMENT);
    EXPECT_EQ(hvds__broadcast(p, &c, 1, -1, nullptr), HVDS_INVALID_ARGUMENT);
  });
}
