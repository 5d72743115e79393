// Response cache: hits, parameter changes, LRU eviction identical for identical sequences.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "response_cache.h"

namespace {

hvds_response_t Resp(const char* name, int64_t numel, int dtype = HVDS_FLOAT32) {
  hvds_response_t r;
  memset(&r, 0, sizeof(r));
  r.type = HVDS_MSG_ALLREDUCE;
  r.dtype = dtype;
  r.reduce_op = HVDS_SUM;
  r.device = -1;
  r.prescale = r.postscale = 1.0;
  hvds__response_add_name(&r, name);
  hvds__response_add_size(&r, numel);
  return r;
}

hvds_request_t Req(const char* name, int64_t numel, int dtype = HVDS_FLOAT32) {
  hvds_request_t q;
  memset(&q, 0, sizeof(q));
  q.type = HVDS_MSG_ALLREDUCE;
  q.dtype = dtype;
  q.reduce_op = HVDS_SUM;
  q.device = -1;
  q.prescale = q.postscale = 1.0;
  q.ndim = 1;
  q.shape[0] = numel;
  q.name = const_cast<char*>(name);
  return q;
}

TEST(ResponseCache, HitMissInvalid) {
  hvds_cache_t c;
  hvds__cache_init(&c, 4);
  hvds_response_t r = Resp("a", 10);
  int32_t slot = hvds__cache_put(&c, &r, 0);
  ASSERT_GE(slot, 0);
  int32_t bit;
  hvds_request_t q = Req("a", 10);
  EXPECT_EQ(hvds__cache_lookup(&c, &q, &bit), HVDS_CACHE_HIT);
  EXPECT_EQ(bit, slot);
  hvds_request_t other = Req("a", 11);
  EXPECT_EQ(hvds__cache_lookup(&c, &other, &bit), HVDS_CACHE_INVALID);
  hvds_request_t dt = Req("a", 10, HVDS_FLOAT64);
  EXPECT_EQ(hvds__cache_lookup(&c, &dt, &bit), HVDS_CACHE_INVALID);
  hvds_request_t missing = Req("b", 10);
  EXPECT_EQ(hvds__cache_lookup(&c, &missing, &bit), HVDS_CACHE_MISS);
  hvds_response_t back;
  ASSERT_EQ(hvds__cache_response(&c, slot, &back), 0);
  EXPECT_STREQ(back.names[0], "a");
  EXPECT_EQ(back.sizes[0], 10);
  hvds__response_free(&back);
  hvds__cache_erase(&c, slot);
  EXPECT_EQ(hvds__cache_lookup(&c, &q, &bit), HVDS_CACHE_MISS);
  hvds__response_free(&r);
  hvds__cache_free(&c);
}

// An allgather response holds every rank's first dimension: a rank hits only while its own is
// unchanged, and the rebuilt response carries all of them and the shape.
TEST(ResponseCache, AllgatherHitsOnlyWithThisRanksSize) {
  hvds_cache_t c;
  hvds__cache_init(&c, 4);
  hvds_response_t r = Resp("g", 0);
  r.type = HVDS_MSG_ALLGATHER;
  r.nsizes = 0;
  for (int64_t d0 : {3, 5, 7}) hvds__response_add_size(&r, d0);
  r.extra = static_cast<int32_t*>(malloc(2 * sizeof(int32_t)));
  r.extra[0] = 3;
  r.extra[1] = 4;
  r.nextra = 2;
  int32_t slot = hvds__cache_put(&c, &r, 0);
  ASSERT_GE(slot, 0);
  hvds_request_t q = Req("g", 5);
  q.type = HVDS_MSG_ALLGATHER;
  q.ndim = 2;
  q.shape[1] = 4;
  q.rank = 1;  // rank 1 had 5 rows
  int32_t bit;
  EXPECT_EQ(hvds__cache_lookup(&c, &q, &bit), HVDS_CACHE_HIT);
  q.shape[0] = 6;
  EXPECT_EQ(hvds__cache_lookup(&c, &q, &bit), HVDS_CACHE_INVALID);
  q.shape[0] = 5;
  q.shape[1] = 2;
  EXPECT_EQ(hvds__cache_lookup(&c, &q, &bit), HVDS_CACHE_INVALID);
  hvds_response_t back;
  ASSERT_EQ(hvds__cache_response(&c, slot, &back), 0);
  EXPECT_EQ(back.type, HVDS_MSG_ALLGATHER);
  ASSERT_EQ(back.nsizes, 3);
  EXPECT_EQ(back.sizes[2], 7);
  ASSERT_EQ(back.nextra, 2);
  EXPECT_EQ(back.extra[1], 4);
  hvds__response_free(&back);
  hvds__response_free(&r);
  hvds__cache_free(&c);
}

// A reducescatter hits with the same shape and parameters, not with a reshaped tensor of the
// same size (the split follows the first dimension).
TEST(ResponseCache, ReducescatterNeedsTheSameShape) {
  hvds_cache_t c;
  hvds__cache_init(&c, 4);
  hvds_response_t r = Resp("rs", 24);
  r.type = HVDS_MSG_REDUCESCATTER;
  r.extra = static_cast<int32_t*>(malloc(2 * sizeof(int32_t)));
  r.extra[0] = 6;
  r.extra[1] = 4;
  r.nextra = 2;
  ASSERT_GE(hvds__cache_put(&c, &r, 0), 0);
  hvds_request_t q = Req("rs", 6);
  q.type = HVDS_MSG_REDUCESCATTER;
  q.ndim = 2;
  q.shape[1] = 4;
  int32_t bit;
  EXPECT_EQ(hvds__cache_lookup(&c, &q, &bit), HVDS_CACHE_HIT);
  q.shape[0] = 4;
  q.shape[1] = 6;
  EXPECT_EQ(hvds__cache_lookup(&c, &q, &bit), HVDS_CACHE_INVALID);
  hvds__response_free(&r);
  hvds__cache_free(&c);
}

TEST(ResponseCache, EvictsLeastRecentlyUsedIdenticallyOnEveryRank) {
  hvds_cache_t a, b;
  hvds__cache_init(&a, 3);
  hvds__cache_init(&b, 3);
  const char* seq[] = {"x", "y", "z", "x", "w", "v", "x"};
  for (const char* name : seq)
    for (hvds_cache_t* c : {&a, &b}) {
      hvds_response_t r = Resp(name, 4);
      hvds__cache_put(c, &r, 0);
      hvds__response_free(&r);
    }
  for (int32_t s = 0; s < 3; s++) {
    const hvds_cache_entry_t* ea = hvds__cache_get(&a, s);
    const hvds_cache_entry_t* eb = hvds__cache_get(&b, s);
    ASSERT_TRUE(ea && eb);
    EXPECT_STREQ(ea->name, eb->name);
  }
  int32_t bit;
  hvds_request_t y = Req("y", 4), x = Req("x", 4);
  EXPECT_EQ(hvds__cache_lookup(&a, &y, &bit), HVDS_CACHE_MISS);  // evicted first
  EXPECT_EQ(hvds__cache_lookup(&a, &x, &bit), HVDS_CACHE_HIT);   // used most
  hvds__cache_free(&a);
  hvds__cache_free(&b);
}

TEST(ResponseCache, DisabledAtCapacityZero) {
  hvds_cache_t c;
  hvds__cache_init(&c, 0);
  hvds_response_t r = Resp("a", 1);
  EXPECT_EQ(hvds__cache_put(&c, &r, 0), -1);
  int32_t bit;
  hvds_request_t q = Req("a", 1);
  EXPECT_EQ(hvds__cache_lookup(&c, &q, &bit), HVDS_CACHE_MISS);
  hvds__response_free(&r);
  hvds__cache_free(&c);
}

}  // namespace
