// Pairwise alltoallv with random splits including zeros.
#include <gtest/gtest.h>

#include <random>

#include "inproc_p2p.h"
#include "test_util.h"

namespace {

unsigned char val(int from, int to, size_t i) {
  return static_cast<unsigned char>(from * 41 + to * 17 + i);
}

void check_alltoall(int n, unsigned seed, size_t max_bytes) {
  // sizes[s][d]: bytes rank s sends to rank d; some zero.
  std::mt19937 rng(seed);
  std::vector<std::vector<size_t>> sizes(n, std::vector<size_t>(n));
  for (auto& row : sizes)
    for (auto& s : row) s = rng() % 4 == 0 ? 0 : rng() % (max_bytes + 1);
  auto world = inproc_world(n);
  inproc_spawn(world, [&](hvds_p2p_t* p) {
    int r = p->rank;
    std::vector<size_t> sb(n), so(n), rb(n), ro(n);
    size_t stotal = 0, rtotal = 0;
    for (int d = 0; d < n; d++) {
      sb[d] = sizes[r][d], so[d] = stotal, stotal += sb[d];
      rb[d] = sizes[d][r], ro[d] = rtotal, rtotal += rb[d];
    }
    std::vector<unsigned char> send(stotal), recv(rtotal, 0xcc);
    for (int d = 0; d < n; d++)
      for (size_t i = 0; i < sb[d]; i++) send[so[d] + i] = val(r, d, i);
    hvds_coll_opts_t o = {5, HVDS_ALGO_AUTO, 0, 0};
    ASSERT_EQ(hvds__alltoallv(p, send.data(), sb.data(), so.data(), recv.data(), rb.data(),
                              ro.data(), &o),
              HVDS_SUCCESS)
        << p->error;
    for (int s = 0; s < n; s++)
      for (size_t i = 0; i < rb[s]; i++)
        ASSERT_EQ(recv[ro[s] + i], val(s, r, i)) << "rank " << r << " from " << s;
  });
  EXPECT_EQ(inproc_pending_messages(world.get()), 0u);
}

}  // namespace

class AlltoallTest : public ::testing::TestWithParam<int> {};

TEST_P(AlltoallTest, RandomSplitsWithZeros) {
  for (unsigned seed = 0; seed < 3; seed++) check_alltoall(GetParam(), seed * 10 + GetParam(), 500);
  check_alltoall(GetParam(), 99, 0);  // everything empty
}

INSTANTIATE_TEST_SUITE_P(Ranks, AlltoallTest, ::testing::Range(1, 9));

TEST(AlltoallArgs, SelfSizeMismatch) {
  inproc_spawn(1, [](hvds_p2p_t* p) {
    char s[4] = {}, r[4] = {};
    size_t sb = 2, rb = 3, off = 0;
    EXPECT_EQ(hvds__alltoallv(p, s, &sb, &off, r, &rb, &off, nullptr), HVDS_INVALID_ARGUMENT);
  });
}
