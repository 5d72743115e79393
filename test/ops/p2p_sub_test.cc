// Sub-communicator views: rank mapping, tag spaces, concurrent views, error translation.
#include <gtest/gtest.h>

#include <thread>

#include "inproc_p2p.h"
#include "test_util.h"

namespace {

// Runs allreduce (ring and rhd), broadcast and barrier on a view; checks the results.
void run_on_view(hvds_p2p_t* v, const std::vector<int>& ranks) {
  int n = static_cast<int>(ranks.size());
  int64_t want = 0;
  for (int r : ranks) want += r + 1;
  for (hvds_algo_t a : {HVDS_ALGO_RING, HVDS_ALGO_RHD}) {
    std::vector<int64_t> buf(1001, ranks[v->rank] + 1);  // contribution = parent rank + 1
    hvds_coll_opts_t o = {7, a, 40, 0};
    ASSERT_EQ(hvds__allreduce(v, buf.data(), buf.size(), HVDS_INT64, HVDS_SUM, &o), HVDS_SUCCESS)
        << v->error;
    for (int64_t x : buf) ASSERT_EQ(x, want);
  }
  std::vector<int> b(300, v->rank == n - 1 ? 42 : 0);
  ASSERT_EQ(hvds__broadcast(v, b.data(), b.size() * sizeof(int), n - 1, nullptr), HVDS_SUCCESS);
  for (int x : b) ASSERT_EQ(x, 42);
  ASSERT_EQ(hvds__barrier(v, nullptr), HVDS_SUCCESS);
}

}  // namespace

TEST(P2pSub, TwoViewsRunConcurrently) {
  const std::vector<int> a = {1, 3, 4}, b = {5, 0, 2};  // b out of order: rank mapping matters
  auto world = inproc_world(6);
  inproc_spawn(world, [&](hvds_p2p_t* p) {
    hvds_p2p_t *va = nullptr, *vb = nullptr;
    ASSERT_EQ(hvds__p2p_sub_create(p, a.data(), 3, 1, &va), HVDS_SUCCESS);
    ASSERT_EQ(hvds__p2p_sub_create(p, b.data(), 3, 2, &vb), HVDS_SUCCESS);
    ASSERT_TRUE((va == nullptr) != (vb == nullptr)) << "each rank is in exactly one view";
    hvds_p2p_t* v = va ? va : vb;
    const std::vector<int>& ranks = va ? a : b;
    EXPECT_EQ(v->size, 3);
    EXPECT_EQ(ranks[v->rank], p->rank);
    run_on_view(v, ranks);
    hvds__p2p_destroy(v);
  });
  EXPECT_EQ(inproc_pending_messages(world.get()), 0u);
}

TEST(P2pSub, ViewAndParentShareTagsWithoutMixing) {
  // The parent and a full view use the same tag at the same time from two threads per rank.
  auto world = inproc_world(4);
  inproc_spawn(world, [&](hvds_p2p_t* p) {
    const int all[] = {0, 1, 2, 3};
    hvds_p2p_t* v = nullptr;
    ASSERT_EQ(hvds__p2p_sub_create(p, all, 4, 9, &v), HVDS_SUCCESS);
    std::thread t([&] {
      std::vector<int32_t> x(500, 1);
      hvds_coll_opts_t o = {1, HVDS_ALGO_RING, 64, 0};
      ASSERT_EQ(hvds__allreduce(v, x.data(), x.size(), HVDS_INT32, HVDS_SUM, &o), HVDS_SUCCESS);
      for (int32_t e : x) ASSERT_EQ(e, 4);
    });
    std::vector<int32_t> y(500, 2);
    hvds_coll_opts_t o = {1, HVDS_ALGO_RING, 64, 0};
    EXPECT_EQ(hvds__allreduce(p, y.data(), y.size(), HVDS_INT32, HVDS_SUM, &o), HVDS_SUCCESS);
    t.join();  // before any ASSERT can return
    for (int32_t e : y) ASSERT_EQ(e, 8);
    hvds__p2p_destroy(v);
  });
}

TEST(P2pSub, BadArguments) {
  inproc_spawn(3, [](hvds_p2p_t* p) {
    hvds_p2p_t* v = reinterpret_cast<hvds_p2p_t*>(1);
    const int dup[] = {0, 0}, out_of_range[] = {0, 3}, ok[] = {0, 1, 2};
    EXPECT_EQ(hvds__p2p_sub_create(p, dup, 2, 1, &v), HVDS_INVALID_ARGUMENT);
    EXPECT_EQ(v, nullptr);
    EXPECT_EQ(hvds__p2p_sub_create(p, out_of_range, 2, 1, &v), HVDS_INVALID_ARGUMENT);
    EXPECT_EQ(hvds__p2p_sub_create(p, ok, 3, 0, &v), HVDS_INVALID_ARGUMENT)
        << "space 0 is the parent's";
    EXPECT_EQ(hvds__p2p_sub_create(p, ok, 0, 1, &v), HVDS_INVALID_ARGUMENT);
    ASSERT_EQ(hvds__p2p_sub_create(p, ok, 3, 1, &v), HVDS_SUCCESS);
    hvds_p2p_req_t* req;
    char c = 0;
    EXPECT_EQ(hvds__p2p_isend(v, 0, &c, 1, uint64_t{1} << 48, &req), HVDS_INVALID_ARGUMENT);
    EXPECT_NE(std::string(v->error).find("2^48"), std::string::npos) << v->error;
    hvds__p2p_destroy(v);
  });
}

TEST(P2pSub, FailureIsTranslatedToViewRanks) {
  auto world = inproc_world(4);
  inproc_spawn(
      world,
      [&](hvds_p2p_t* p) {
        const int ranks[] = {3, 1};
        hvds_p2p_t* v = nullptr;
        ASSERT_EQ(hvds__p2p_sub_create(p, ranks, 2, 5, &v), HVDS_SUCCESS);
        if (v == nullptr) return;
        if (p->rank == 3) {
          hvds__p2p_abort(v);  // aborting the view aborts the parent: rank 3 dies
        } else {
          char c;
          EXPECT_EQ(hvds__p2p_recv(v, 0, &c, 1, 0), HVDS_REMOTE_ERROR);
          EXPECT_EQ(v->failed_peer, 0) << "view rank of parent rank 3";
          EXPECT_NE(std::string(v->error).find("rank 3"), std::string::npos) << v->error;
        }
        hvds__p2p_destroy(v);
      },
      20000);
}
