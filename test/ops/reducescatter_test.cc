// Ring reduce-scatter with uneven and zero block sizes.
#include <gtest/gtest.h>

#include <random>

#include "inproc_p2p.h"
#include "test_util.h"

using namespace hvds_test;

namespace {

void check_reducescatter(int nranks, const std::vector<size_t>& counts, size_t chunk) {
  size_t total = 0;
  for (size_t c : counts) total += c;
  auto world = inproc_world(nranks);
  inproc_spawn(world, [&](hvds_p2p_t* p) {
    size_t off = 0;
    for (int r = 0; r < p->rank; r++) off += counts[r];
    uint64_t tag = 0;
    for (int ti = 0; ti < HVDS_DTYPE_COUNT; ti++) {
      hvds_dtype_t t = static_cast<hvds_dtype_t>(ti);
      size_t es = hvds__dtype_bytes(t);
      for (int op : {HVDS_SUM, HVDS_MAX, HVDS_PRODUCT}) {
        std::vector<char> buf = make_input(t, op, nranks, p->rank, total);
        std::vector<char> want = make_expected(t, op, nranks, total);
        hvds_coll_opts_t o = {tag++, HVDS_ALGO_AUTO, chunk, 0};
        ASSERT_EQ(hvds__reducescatter(p, buf.data(), counts.data(), t, op_arg(op), &o),
                  HVDS_SUCCESS)
            << p->error;
        std::vector<char> mine(buf.begin() + off * es, buf.begin() + (off + counts[p->rank]) * es);
        std::vector<char> exp(want.begin() + off * es, want.begin() + (off + counts[p->rank]) * es);
        ASSERT_EQ(first_diff(mine, exp, es), -1) << "rank " << p->rank << " " << dtype_str(t);
      }
    }
  });
  EXPECT_EQ(inproc_pending_messages(world.get()), 0u);
}

}  // namespace

class ReducescatterTest : public ::testing::TestWithParam<int> {};

TEST_P(ReducescatterTest, UnevenAndZeroBlocks) {
  int nranks = GetParam();
  std::mt19937 rng(nranks);
  std::vector<size_t> counts(nranks);
  for (int r = 0; r < nranks; r++) counts[r] = rng() % 3 == 0 ? 0 : rng() % 300;
  check_reducescatter(nranks, counts, 0);
  check_reducescatter(nranks, counts, 40);  // many segments per block
  check_reducescatter(nranks, std::vector<size_t>(nranks, 0), 0);
  std::vector<size_t> one(nranks, 0);
  one[nranks - 1] = 1;
  check_reducescatter(nranks, one, 0);
}

INSTANTIATE_TEST_SUITE_P(Ranks, ReducescatterTest, ::testing::Range(1, 9));

TEST(ReducescatterLarge, OneMiElements) {
  inproc_spawn(4, [](hvds_p2p_t* p) {
    const size_t n = 1 << 20;
    std::vector<size_t> counts = {n / 2, 0, n / 4 + 1, n / 4 - 1};
    std::vector<float> buf(n, static_cast<float>(p->rank + 1));
    hvds_coll_opts_t o = {9, HVDS_ALGO_AUTO, 100000, 0};
    ASSERT_EQ(hvds__reducescatter(p, buf.data(), counts.data(), HVDS_FLOAT32, HVDS_SUM, &o),
              HVDS_SUCCESS);
    size_t off = 0;
    for (int r = 0; r < p->rank; r++) off += counts[r];
    for (size_t i = off; i < off + counts[p->rank]; i++) ASSERT_EQ(buf[i], 10.0f) << i;
  });
}
