// Wire format of negotiation messages: round trips, and malformed input refused with nothing
// allocated.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "message.h"

namespace {

hvds_request_t MakeRequest(const char* name, int rank) {
  hvds_request_t r;
  memset(&r, 0, sizeof(r));
  r.rank = rank;
  r.type = HVDS_MSG_ALLREDUCE;
  r.dtype = HVDS_FLOAT32;
  r.device = -1;
  r.reduce_op = HVDS_SUM;
  r.prescale = 0.5;
  r.postscale = 2.0;
  r.ndim = 2;
  r.shape[0] = 17;
  r.shape[1] = 3;
  r.name = const_cast<char*>(name);
  return r;
}

TEST(Message, RequestsRoundTrip) {
  static int32_t ranks[] = {0, 2, 5};
  hvds_request_t in[2] = {MakeRequest("grad.w", 1), MakeRequest("grad.b", 1)};
  in[1].type = HVDS_MSG_PS_ADD;
  in[1].extra = ranks;
  in[1].nextra = 3;
  hvds_buf_t b = {};
  hvds__encode_requests(&b, in, 2, 7);
  ASSERT_FALSE(b.oom);
  hvds_request_t* out = nullptr;
  int32_t n = 0, flags = 0;
  ASSERT_EQ(hvds__decode_requests(b.data, b.len, &out, &n, &flags), HVDS_SUCCESS);
  ASSERT_EQ(n, 2);
  EXPECT_EQ(flags, 7);
  EXPECT_STREQ(out[0].name, "grad.w");
  EXPECT_EQ(out[0].shape[0], 17);
  EXPECT_EQ(out[0].shape[1], 3);
  EXPECT_DOUBLE_EQ(out[0].prescale, 0.5);
  EXPECT_EQ(out[1].nextra, 3);
  EXPECT_EQ(out[1].extra[2], 5);
  for (int i = 0; i < n; i++) hvds__request_free(&out[i]);
  free(out);
  hvds__buf_free(&b);
}

TEST(Message, ResponsesRoundTrip) {
  hvds_response_t r;
  memset(&r, 0, sizeof(r));
  r.type = HVDS_MSG_ERROR;
  r.last_joined_rank = 3;
  for (int i = 0; i < 100; i++) {
    ASSERT_EQ(hvds__response_add_name(&r, ("t" + std::to_string(i)).c_str()), 0);
    ASSERT_EQ(hvds__response_add_size(&r, i), 0);
  }
  r.error = strdup("Mismatched data types");
  hvds_buf_t b = {};
  hvds__encode_responses(&b, &r, 1, 0);
  hvds_response_t* out = nullptr;
  int32_t n = 0, flags = 0;
  ASSERT_EQ(hvds__decode_responses(b.data, b.len, &out, &n, &flags), HVDS_SUCCESS);
  ASSERT_EQ(n, 1);
  ASSERT_EQ(out[0].nnames, 100);
  EXPECT_STREQ(out[0].names[99], "t99");
  EXPECT_EQ(out[0].sizes[42], 42);
  EXPECT_STREQ(out[0].error, "Mismatched data types");
  EXPECT_EQ(out[0].last_joined_rank, 3);
  // A decoded response can still grow (fusion appends to it).
  ASSERT_EQ(hvds__response_add_name(&out[0], "extra"), 0);
  EXPECT_STREQ(out[0].names[100], "extra");
  hvds__response_free(&out[0]);
  free(out);
  hvds__response_free(&r);
  hvds__buf_free(&b);
}

TEST(Message, TruncatedAndCorruptInputIsRefused) {
  hvds_request_t in = MakeRequest("grad.w", 0);
  hvds_buf_t b = {};
  hvds__encode_requests(&b, &in, 1, 0);
  hvds_request_t* out = nullptr;
  int32_t n = 0, flags = 0;
  for (size_t len = 0; len < b.len; len++)
    EXPECT_EQ(hvds__decode_requests(b.data, len, &out, &n, &flags), HVDS_INVALID_ARGUMENT) << len;
  // A count that promises more items than the bytes could hold is refused before allocating.
  std::vector<uint8_t> bad(b.data, b.data + b.len);
  uint32_t huge = 0xffffffffu;
  memcpy(bad.data() + 4, &huge, 4);
  EXPECT_EQ(hvds__decode_requests(bad.data(), bad.size(), &out, &n, &flags), HVDS_INVALID_ARGUMENT);
  // Random garbage never crashes and is never accepted as a request list with trailing bytes.
  std::mt19937 rng(1);
  for (int i = 0; i < 20000; i++) {
    std::vector<uint8_t> g(rng() % 200);
    for (auto& c : g) c = (uint8_t)rng();
    if (g.size() >= 4) memcpy(g.data(), b.data, 4);  // right magic, wrong rest
    if (hvds__decode_requests(g.data(), g.size(), &out, &n, &flags) == HVDS_SUCCESS) {
      for (int k = 0; k < n; k++) hvds__request_free(&out[k]);
      free(out);
    }
    hvds_response_t* rs = nullptr;
    if (hvds__decode_responses(g.data(), g.size(), &rs, &n, &flags) == HVDS_SUCCESS) {
      for (int k = 0; k < n; k++) hvds__response_free(&rs[k]);
      free(rs);
    }
  }
  hvds__buf_free(&b);
}

}  // namespace
