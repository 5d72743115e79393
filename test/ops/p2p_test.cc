// The p2p wrappers, the pipelined exchange step, and failure behaviour over the in-process
// transport: argument errors, timeouts, and a dead rank failing its peers with its name.
#include <gtest/gtest.h>

#include <string>

#include "inproc_p2p.h"
#include "test_util.h"

namespace {

bool mentions(const hvds_p2p_t* p, const std::string& s) {
  return std::string(p->error).find(s) != std::string::npos;
}

}  // namespace

TEST(P2p, ArgumentChecks) {
  inproc_spawn(2, [](hvds_p2p_t* p) {
    if (p->rank != 0) return;
    hvds_p2p_req_t* req = nullptr;
    char c = 0;
    EXPECT_EQ(hvds__p2p_isend(p, 2, &c, 1, 0, &req), HVDS_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions(p, "peer 2 out of range")) << p->error;
    EXPECT_EQ(hvds__p2p_irecv(p, -1, &c, 1, 0, &req), HVDS_INVALID_ARGUMENT);
    EXPECT_EQ(hvds__p2p_isend(p, 1, nullptr, 4, 0, &req), HVDS_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions(p, "NULL buffer")) << p->error;
    EXPECT_EQ(hvds__p2p_irecv(p, 1, nullptr, 4, 0, &req), HVDS_INVALID_ARGUMENT);
    EXPECT_EQ(req, nullptr);
    EXPECT_EQ(hvds__p2p_send(p, 1, nullptr, 0, 0), HVDS_SUCCESS) << "empty message is fine";
  });
}

TEST(P2p, SameTagMatchesInPostingOrder) {
  inproc_spawn(2, [](hvds_p2p_t* p) {
    int v[3] = {10, 20, 30};
    if (p->rank == 0) {
      for (int i = 0; i < 3; i++)
        ASSERT_EQ(hvds__p2p_send(p, 1, &v[i], sizeof(int), 4), HVDS_SUCCESS);
      return;
    }
    int got[3] = {};
    hvds_p2p_req_t* reqs[3];
    for (int i = 0; i < 3; i++)
      ASSERT_EQ(hvds__p2p_irecv(p, 0, &got[i], sizeof(int), 4, &reqs[i]), HVDS_SUCCESS);
    ASSERT_EQ(hvds__p2p_wait_all(p, reqs, 3), HVDS_SUCCESS);
    EXPECT_EQ(got[0], 10);
    EXPECT_EQ(got[1], 20);
    EXPECT_EQ(got[2], 30);
  });
}

TEST(P2p, SegmentedExchangeReducesInPlace) {
  // Both ranks swap and fold the same buffer (sbuf == rbuf), in 3-element segments.
  inproc_spawn(2, [](hvds_p2p_t* p) {
    std::vector<int32_t> v(100);
    for (int i = 0; i < 100; i++) v[i] = i * (p->rank + 1);
    std::vector<int32_t> scratch(6);
    hvds_p2p_seg_t seg = {12, scratch.data(), HVDS_INT32, HVDS_SUM};
    int peer = 1 - p->rank;
    ASSERT_EQ(hvds__p2p_sendrecv_seg(p, peer, v.data(), 400, peer, v.data(), 400, 0, &seg),
              HVDS_SUCCESS);
    for (int i = 0; i < 100; i++) ASSERT_EQ(v[i], 3 * i);
  });
}

TEST(P2p, TimeoutIsReportedAndSticky) {
  auto world = inproc_world(2);
  inproc_spawn(
      world,
      [](hvds_p2p_t* p) {
        if (p->rank == 1) return;  // never sends
        char c;
        EXPECT_EQ(hvds__p2p_recv(p, 1, &c, 1, 0), HVDS_TIMEOUT);
        EXPECT_EQ(p->failed_peer, 1);
        EXPECT_TRUE(mentions(p, "timed out")) << p->error;
        EXPECT_EQ(hvds__p2p_send(p, 1, &c, 1, 0), HVDS_TIMEOUT)
            << "a timed-out communicator stays failed";
      },
      200);
}

TEST(P2p, SizeMismatchFails) {
  inproc_spawn(2, [](hvds_p2p_t* p) {
    char buf[8] = {};
    if (p->rank == 0) {
      ASSERT_EQ(hvds__p2p_send(p, 1, buf, 8, 0), HVDS_SUCCESS);
    } else {
      EXPECT_EQ(hvds__p2p_recv(p, 0, buf, 4, 0), HVDS_INTERNAL_ERROR);
      EXPECT_TRUE(mentions(p, "8 bytes, expected 4")) << p->error;
    }
  });
}

// A rank dies before the collective; its neighbours fail naming it, and once they abort (as
// the runtime does on any failure) every other rank fails quickly too, instead of timing out.
class DeadRankTest : public ::testing::TestWithParam<hvds_algo_t> {};

TEST_P(DeadRankTest, PeersFailNamingTheDeadRank) {
  const int n = 5, dead = 2;
  std::vector<hvds_result_t> rc(n, HVDS_SUCCESS);
  std::vector<int> failed_peer(n, -1);
  std::vector<std::string> msg(n);
  auto world = inproc_world(n);
  inproc_spawn(
      world,
      [&](hvds_p2p_t* p) {
        if (p->rank == dead) {
          hvds__p2p_abort(p);  // "dies": connections closed
          return;
        }
        std::vector<float> v(1001, 1.0f);
        hvds_coll_opts_t o = {0, GetParam(), 64, 0};
        rc[p->rank] = hvds__allreduce(p, v.data(), v.size(), HVDS_FLOAT32, HVDS_SUM, &o);
        failed_peer[p->rank] = p->failed_peer;
        msg[p->rank] = p->error;
        if (rc[p->rank] != HVDS_SUCCESS) hvds__p2p_abort(p);
      },
      20000);
  for (int r = 0; r < n; r++) {
    if (r == dead) continue;
    EXPECT_NE(rc[r], HVDS_SUCCESS) << "rank " << r;
  }
  // The first partner of rank 2: its ring successor; in halving-doubling (P2 = 4, rank 0 folds
  // into rank 1) rank 2 is new rank 1, whose first partner is new rank 0 = rank 1.
  int first = GetParam() == HVDS_ALGO_RING ? 3 : 1;
  EXPECT_EQ(rc[first], HVDS_REMOTE_ERROR);
  EXPECT_EQ(failed_peer[first], dead);
  EXPECT_NE(msg[first].find("rank 2"), std::string::npos) << msg[first];
}

INSTANTIATE_TEST_SUITE_P(Algorithms, DeadRankTest,
                         ::testing::Values(HVDS_ALGO_RING, HVDS_ALGO_RHD));

TEST(P2pFault, BroadcastAndGatherFailToo) {
  auto world = inproc_world(4);
  std::vector<hvds_result_t> rc(4, HVDS_SUCCESS);
  inproc_spawn(
      world,
      [&](hvds_p2p_t* p) {
        if (p->rank == 0) {  // the root dies
          hvds__p2p_abort(p);
          return;
        }
        std::vector<char> buf(5000);
        rc[p->rank] = hvds__broadcast(p, buf.data(), buf.size(), 0, nullptr);
        if (rc[p->rank] != HVDS_SUCCESS) hvds__p2p_abort(p);
      },
      20000);
  for (int r = 1; r < 4; r++) EXPECT_NE(rc[r], HVDS_SUCCESS) << r;
}
