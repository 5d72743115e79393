// The request and unexpected-message queues that the tcp and shm transports share: oldest
// first by tag, unlinking anywhere, the pool's bound. (Here rather than in ops_test, whose
// in-process transport has its own request type.)
#include "p2p_queue.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace {

std::vector<uint64_t> Tags(const hvds_req_fifo_t& q) {
  std::vector<uint64_t> out;
  for (hvds_p2p_req_t* r = q.head; r != nullptr; r = r->next) out.push_back(r->tag);
  return out;
}

TEST(P2pQueue, TakeTagReturnsTheOldestWithThatTagAndKeepsTheRestInOrder) {
  hvds_req_pool_t pool{};
  hvds_req_fifo_t q{};
  const uint64_t tags[] = {5, 7, 5, 9, 7};
  hvds_p2p_req_t* reqs[5];
  for (int i = 0; i < 5; i++) {
    reqs[i] = hvds__req_take(&pool);
    ASSERT_NE(reqs[i], nullptr);
    reqs[i]->tag = tags[i];
    hvds__req_append(&q, reqs[i]);
  }
  EXPECT_EQ(hvds__req_take_tag(&q, 7), reqs[1]);
  EXPECT_EQ(hvds__req_take_tag(&q, 5), reqs[0]);
  EXPECT_EQ(hvds__req_take_tag(&q, 8), nullptr);
  EXPECT_EQ(Tags(q), (std::vector<uint64_t>{5, 9, 7}));
  EXPECT_EQ(hvds__req_take_tag(&q, 7), reqs[4]);  // the tail: appending still works after it
  EXPECT_EQ(q.tail, reqs[3]);
  hvds__req_append(&q, reqs[1]);
  EXPECT_EQ(Tags(q), (std::vector<uint64_t>{5, 9, 7}));
  for (hvds_p2p_req_t* r : reqs) hvds__req_release(&pool, r);
  hvds__req_pool_clear(&pool);
}

TEST(P2pQueue, UnlinkAndPopKeepHeadAndTailRight) {
  hvds_req_pool_t pool{};
  hvds_req_fifo_t q{};
  hvds_p2p_req_t* reqs[3];
  for (int i = 0; i < 3; i++) {
    reqs[i] = hvds__req_take(&pool);
    reqs[i]->tag = static_cast<uint64_t>(i);
    hvds__req_append(&q, reqs[i]);
  }
  hvds_req_fifo_t other{};
  EXPECT_EQ(hvds__req_unlink(&other, reqs[1]), 0);  // not there: nothing changes
  EXPECT_EQ(hvds__req_unlink(&q, reqs[2]), 1);
  EXPECT_EQ(q.tail, reqs[1]);
  EXPECT_EQ(hvds__req_unlink(&q, reqs[2]), 0);
  hvds__req_pop(&q);
  EXPECT_EQ(q.head, reqs[1]);
  hvds__req_pop(&q);
  EXPECT_EQ(q.head, nullptr);
  EXPECT_EQ(q.tail, nullptr);
  for (hvds_p2p_req_t* r : reqs) hvds__req_release(&pool, r);
  hvds__req_pool_clear(&pool);
}

TEST(P2pQueue, PoolHandsOutZeroedRequestsAndKeepsAtMostItsBound) {
  hvds_req_pool_t pool{};
  std::vector<hvds_p2p_req_t*> reqs;
  for (int i = 0; i < HVDS_REQ_POOL_MAX + 10; i++) reqs.push_back(hvds__req_take(&pool));
  for (hvds_p2p_req_t* r : reqs) {
    r->tag = 42;
    r->sent = 3;
    hvds__req_release(&pool, r);
  }
  EXPECT_EQ(pool.n, HVDS_REQ_POOL_MAX);
  hvds_p2p_req_t* again = hvds__req_take(&pool);
  EXPECT_EQ(again->tag, 0u);
  EXPECT_EQ(again->sent, 0u);
  EXPECT_EQ(again->next, nullptr);
  hvds__req_release(&pool, again);
  hvds__req_pool_clear(&pool);
  EXPECT_EQ(pool.n, 0);
  EXPECT_EQ(pool.free, nullptr);
}

TEST(P2pQueue, UnexpectedMessagesMatchOldestFirstAndDropAnywhere) {
  hvds_ux_list_t l{};
  hvds_ux_t* a = hvds__ux_push(&l, 3, 4);
  hvds_ux_t* b = hvds__ux_push(&l, 3, 0);
  hvds_ux_t* c = hvds__ux_push(&l, 6, 2);
  ASSERT_TRUE(a != nullptr && b != nullptr && c != nullptr);
  EXPECT_NE(a->data, nullptr);
  EXPECT_EQ(b->data, nullptr);  // an empty message owns no buffer
  EXPECT_EQ(hvds__ux_find(&l, 3), a);
  EXPECT_EQ(hvds__ux_find(&l, 4), nullptr);
  hvds__ux_drop(&l, a);
  EXPECT_EQ(hvds__ux_find(&l, 3), b);
  hvds__ux_drop(&l, c);  // the tail
  EXPECT_EQ(l.tail, b);
  hvds_ux_t* d = hvds__ux_push(&l, 6, 1);
  EXPECT_EQ(b->next, d);
  hvds__ux_clear(&l);
  EXPECT_EQ(l.head, nullptr);
  EXPECT_EQ(l.tail, nullptr);
}

}  // namespace
