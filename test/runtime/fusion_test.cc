// Fusion planner: buckets by threshold and compatibility, look-ahead, order kept.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "fusion.h"

namespace {

hvds_response_t Resp(const std::string& name, int64_t numel, int type = HVDS_MSG_ALLREDUCE,
                     int dtype = HVDS_FLOAT32) {
  hvds_response_t r;
  memset(&r, 0, sizeof(r));
  r.type = type;
  r.dtype = dtype;
  r.reduce_op = HVDS_SUM;
  r.device = -1;
  r.prescale = r.postscale = 1.0;
  hvds__response_add_name(&r, name.c_str());
  hvds__response_add_size(&r, numel);
  return r;
}

std::vector<std::vector<std::string>> Plan(std::vector<hvds_response_t> in, int64_t threshold) {
  hvds_response_t* arr = (hvds_response_t*)calloc(in.size() + 1, sizeof(hvds_response_t));
  for (size_t i = 0; i < in.size(); i++) arr[i] = in[i];
  hvds_response_t* out = nullptr;
  int32_t n = 0;
  EXPECT_EQ(hvds__fuse_responses(arr, (int32_t)in.size(), threshold, &out, &n), 0);
  free(arr);
  std::vector<std::vector<std::string>> buckets;
  for (int32_t i = 0; i < n; i++) {
    buckets.emplace_back();
    for (int32_t k = 0; k < out[i].nnames; k++) buckets.back().push_back(out[i].names[k]);
    EXPECT_EQ(out[i].nnames, out[i].nsizes);
    hvds__response_free(&out[i]);
  }
  free(out);
  return buckets;
}

TEST(Fusion, FillsBucketsUpToThreshold) {
  // 4-byte floats: 10 elements = 40 bytes each.
  auto b = Plan({Resp("a", 10), Resp("b", 10), Resp("c", 10), Resp("d", 10)}, 80);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0], (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(b[1], (std::vector<std::string>{"c", "d"}));
}

TEST(Fusion, ZeroThresholdDisables) {
  auto b = Plan({Resp("a", 1), Resp("b", 1)}, 0);
  EXPECT_EQ(b.size(), 2u);
}

TEST(Fusion, LooksAheadOverDifferentDtypes) {
  auto b = Plan({Resp("a", 1), Resp("h", 1, HVDS_MSG_ALLREDUCE, HVDS_FLOAT16), Resp("b", 1),
                 Resp("g", 1, HVDS_MSG_ALLGATHER)},
                1 << 20);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0], (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(b[1], (std::vector<std::string>{"h"}));
  EXPECT_EQ(b[2], (std::vector<std::string>{"g"}));
}

TEST(Fusion, ThousandSmallTensorsMakeOneBucket) {
  std::vector<hvds_response_t> in;
  for (int i = 0; i < 1000; i++) in.push_back(Resp("t" + std::to_string(i), 1024));
  auto b = Plan(in, 128 << 20);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].size(), 1000u);
  EXPECT_EQ(b[0][999], "t999");
}

// The fast path hands over runs it already fused: such a bucket grows with later tensors and
// joins an earlier bucket whole, within the threshold.
TEST(Fusion, PrefusedBucketsGrowAndJoin) {
  hvds_response_t ab = Resp("a", 10);
  hvds__response_add_name(&ab, "b");
  hvds__response_add_size(&ab, 10);
  hvds_response_t cd = Resp("c", 10);
  hvds__response_add_name(&cd, "d");
  hvds__response_add_size(&cd, 10);
  auto b = Plan({ab, Resp("h", 1, HVDS_MSG_ALLREDUCE, HVDS_FLOAT16), cd, Resp("e", 10)}, 160);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0], (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(b[1], (std::vector<std::string>{"h"}));
  EXPECT_EQ(b[2], (std::vector<std::string>{"e"}));
}

}  // namespace
