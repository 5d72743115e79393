// Ring and halving-doubling allreduce, ranks as threads: every dtype and op, against a serial
// reference, for counts 0, 1, ranks-1 and odd, with the default and a tiny pipeline segment.
#include <gtest/gtest.h>

#include <tuple>

#include "inproc_p2p.h"
#include "test_util.h"

using namespace hvds_test;

namespace {

typedef hvds_result_t (*allreduce_fn)(hvds_p2p_t*, void*, size_t, hvds_dtype_t, hvds_reduce_op_t,
                                      const hvds_coll_opts_t*);

allreduce_fn algo_fn(hvds_algo_t a) {
  return a == HVDS_ALGO_RING  ? hvds__allreduce_ring
         : a == HVDS_ALGO_RHD ? hvds__allreduce_rhd
                              : hvds__allreduce;
}

// Runs one allreduce per (dtype, op) on every rank and checks every rank's result.
void check_allreduce(hvds_algo_t algo, int nranks, size_t count, size_t chunk,
                     const std::vector<hvds_dtype_t>& dtypes, bool all_ops) {
  auto world = inproc_world(nranks);
  inproc_spawn(world, [&](hvds_p2p_t* p) {
    uint64_t tag = 1;
    for (hvds_dtype_t t : dtypes) {
      std::vector<int> ops = all_ops ? ops_for(t) : std::vector<int>{HVDS_SUM};
      for (int op : ops) {
        std::vector<char> buf = make_input(t, op, nranks, p->rank, count);
        std::vector<char> want = make_expected(t, op, nranks, count);
        hvds_coll_opts_t o = {tag++, algo, chunk, 0};
        hvds_result_t rc = algo_fn(algo)(p, buf.data(), count, t, op_arg(op), &o);
        ASSERT_EQ(rc, HVDS_SUCCESS) << p->error;
        ASSERT_EQ(first_diff(buf, want, hvds__dtype_bytes(t)), -1)
            << "rank " << p->rank << " " << dtype_str(t) << " op " << op;
      }
    }
  });
  EXPECT_EQ(inproc_pending_messages(world.get()), 0u) << "unreceived messages";
}

std::vector<hvds_dtype_t> all_dtypes() {
  std::vector<hvds_dtype_t> v;
  for (int t = 0; t < HVDS_DTYPE_COUNT; t++) v.push_back(static_cast<hvds_dtype_t>(t));
  return v;
}

// (algorithm, ranks, count kind: 0 -> 0, 1 -> 1, 2 -> ranks-1, 3 -> 1001, chunk bytes)
using Param = std::tuple<hvds_algo_t, int, int, size_t>;

size_t count_of(int kind, int nranks) {
  const size_t counts[] = {0, 1, static_cast<size_t>(nranks - 1), 1001};
  return counts[kind];
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  static const char* const names[] = {"auto", "ring", "rhd"};
  return std::string(names[std::get<0>(info.param)]) + "_ranks" +
         std::to_string(std::get<1>(info.param)) + "_count" +
         std::to_string(std::get<2>(info.param)) + "_chunk" +
         std::to_string(std::get<3>(info.param));
}

}  // namespace

class AllreduceTest : public ::testing::TestWithParam<Param> {};

TEST_P(AllreduceTest, EveryDtypeAndOpMatchesReference) {
  auto [algo, nranks, kind, chunk] = GetParam();
  check_allreduce(algo, nranks, count_of(kind, nranks), chunk, all_dtypes(), true);
}

INSTANTIATE_TEST_SUITE_P(Small, AllreduceTest,
                         ::testing::Combine(::testing::Values(HVDS_ALGO_RING, HVDS_ALGO_RHD,
                                                              HVDS_ALGO_AUTO),
                                            ::testing::Range(1, 9), ::testing::Range(0, 4),
                                            ::testing::Values(size_t{0}, size_t{36})),
                         param_name);

// 1 << 20 elements: a few combinations, default and 64 KiB segments.
TEST(AllreduceLarge, RingAndRhdOneMiElements) {
  const size_t n = 1 << 20;
  check_allreduce(HVDS_ALGO_RING, 3, n, 0, {HVDS_FLOAT32}, false);
  check_allreduce(HVDS_ALGO_RING, 8, n, 64 << 10, {HVDS_FLOAT32}, false);
  check_allreduce(HVDS_ALGO_RHD, 6, n, 0, {HVDS_FLOAT32}, false);
  check_allreduce(HVDS_ALGO_RHD, 4, n, 64 << 10, {HVDS_INT64}, false);
  check_allreduce(HVDS_ALGO_AUTO, 5, n, 0, {HVDS_BFLOAT16}, false);
}

TEST(AllreduceDispatch, ChoiceFollowsOptions) {
  hvds_p2p_t p = {};
  p.size = 4;
  EXPECT_STREQ(hvds__allreduce_choice(&p, 1000, nullptr), "rhd");
  EXPECT_STREQ(hvds__allreduce_choice(&p, HVDS_COLL_DEFAULT_RHD_MAX_BYTES, nullptr), "rhd");
  EXPECT_STREQ(hvds__allreduce_choice(&p, HVDS_COLL_DEFAULT_RHD_MAX_BYTES + 1, nullptr), "ring");
  hvds_coll_opts_t o = {0, HVDS_ALGO_AUTO, 0, 100};
  EXPECT_STREQ(hvds__allreduce_choice(&p, 101, &o), "ring");
  o.algorithm = HVDS_ALGO_RHD;
  EXPECT_STREQ(hvds__allreduce_choice(&p, 1 << 30, &o), "rhd");
  o.algorithm = HVDS_ALGO_RING;
  EXPECT_STREQ(hvds__allreduce_choice(&p, 1, &o), "ring");
}

// The switch point the runtime takes when nobody set one: 64 KiB where the wire is the limit,
// 1 MiB on fast links, loopback or an unknown link (docs/benchmarks.md's sweeps).
TEST(AllreduceDispatch, SwitchPointFollowsTheLink) {
  EXPECT_EQ(hvds__coll_rhd_max_for_link(0), size_t(1) << 20);
  EXPECT_EQ(hvds__coll_rhd_max_for_link(8.0 / 100e6), size_t(64) << 10);  // 100 Mbit/s
  EXPECT_EQ(hvds__coll_rhd_max_for_link(8.0 / 1e9), size_t(64) << 10);    // 1 Gbit/s
  EXPECT_EQ(hvds__coll_rhd_max_for_link(8.0 / 4e9), size_t(64) << 10);    // 4 Gbit/s
  EXPECT_EQ(hvds__coll_rhd_max_for_link(8.0 / 10e9), size_t(1) << 20);    // 10 Gbit/s
  EXPECT_EQ(hvds__coll_rhd_max_for_link(1e-11), size_t(1) << 20);         // loopback
  hvds_p2p_t p = {};
  p.size = 8;
  hvds_coll_opts_t o = {0, HVDS_ALGO_AUTO, 0, hvds__coll_rhd_max_for_link(8.0 / 1e9)};
  EXPECT_STREQ(hvds__allreduce_choice(&p, 64 << 10, &o), "rhd");
  EXPECT_STREQ(hvds__allreduce_choice(&p, 128 << 10, &o), "ring");
}

TEST(AllreduceDispatch, SegmentRoundsToElements) {
  hvds_coll_opts_t o = {0, HVDS_ALGO_AUTO, 36, 0};
  EXPECT_EQ(hvds__coll_segment(&o, 8), 32u);
  EXPECT_EQ(hvds__coll_segment(&o, 4), 36u);
  o.chunk_bytes = 3;
  EXPECT_EQ(hvds__coll_segment(&o, 8), 8u);
  EXPECT_EQ(hvds__coll_segment(nullptr, 4), HVDS_COLL_DEFAULT_CHUNK_BYTES);
}

TEST(AllreduceDispatch, UnsupportedOpFailsEverywhereWithoutMessages) {
  auto world = inproc_world(3);
  inproc_spawn(world, [](hvds_p2p_t* p) {
    float buf[4] = {1, 2, 3, 4};
    for (hvds_algo_t a : {HVDS_ALGO_AUTO, HVDS_ALGO_RING, HVDS_ALGO_RHD}) {
      hvds_coll_opts_t o = {0, a, 0, 0};
      EXPECT_EQ(algo_fn(a)(p, buf, 4, HVDS_FLOAT32, op_arg(kBand), &o), HVDS_NOT_SUPPORTED);
      EXPECT_NE(std::string(p->error).find("not supported"), std::string::npos) << p->error;
      EXPECT_EQ(algo_fn(a)(p, buf, 4, HVDS_FLOAT32, HVDS_ADASUM, &o), HVDS_NOT_SUPPORTED);
    }
    hvds_coll_opts_t bad = {0, static_cast<hvds_algo_t>(3), 0, 0};
    EXPECT_EQ(hvds__allreduce(p, buf, 4, HVDS_FLOAT32, HVDS_SUM, &bad), HVDS_INVALID_ARGUMENT);
  });
  EXPECT_EQ(inproc_pending_messages(world.get()), 0u);
}

TEST(AllreduceDispatch, NullOptionsUseDefaults) {
  inproc_spawn(5, [](hvds_p2p_t* p) {
    std::vector<int32_t> v(77, p->rank + 1);
    ASSERT_EQ(hvds__allreduce(p, v.data(), v.size(), HVDS_INT32, HVDS_SUM, nullptr), HVDS_SUCCESS);
    for (int32_t x : v) ASSERT_EQ(x, 15);
  });
}
