// Ring allgatherv with variable and zero-size blocks.
#include <gtest/gtest.h>

#include <random>

#include "inproc_p2p.h"
#include "test_util.h"

namespace {

unsigned char pattern(int rank, size_t i) {
  return static_cast<unsigned char>(rank * 31 + i * 7 + 1);
}

void check_allgather(int nranks, const std::vector<size_t>& bytes, size_t chunk) {
  size_t total = 0;
  std::vector<size_t> off;
  for (size_t b : bytes) off.push_back(total), total += b;
  auto world = inproc_world(nranks);
  inproc_spawn(world, [&](hvds_p2p_t* p) {
    std::vector<unsigned char> buf(total, 0xee);
    for (size_t i = 0; i < bytes[p->rank]; i++) buf[off[p->rank] + i] = pattern(p->rank, i);
    hvds_coll_opts_t o = {3, HVDS_ALGO_AUTO, chunk, 0};
    ASSERT_EQ(hvds__allgatherv(p, buf.data(), bytes.data(), &o), HVDS_SUCCESS) << p->error;
    for (int r = 0; r < nranks; r++)
      for (size_t i = 0; i < bytes[r]; i++)
        ASSERT_EQ(buf[off[r] + i], pattern(r, i)) << "rank " << p->rank << " block " << r;
  });
  EXPECT_EQ(inproc_pending_messages(world.get()), 0u);
}

}  // namespace

class AllgatherTest : public ::testing::TestWithParam<int> {};

TEST_P(AllgatherTest, VariableAndZeroBlocks) {
  int nranks = GetParam();
  std::mt19937 rng(nranks + 100);
  std::vector<size_t> bytes(nranks);
  for (int r = 0; r < nranks; r++) bytes[r] = rng() % 2 ? 0 : rng() % 1001;
  check_allgather(nranks, bytes, 0);
  check_allgather(nranks, bytes, 7);
  check_allgather(nranks, std::vector<size_t>(nranks, 0), 0);
  check_allgather(nranks, std::vector<size_t>(nranks, 1), 0);
  std::vector<size_t> first_only(nranks, 0);
  first_only[0] = 1001;
  check_allgather(nranks, first_only, 64);
}

INSTANTIATE_TEST_SUITE_P(Ranks, AllgatherTest, ::testing::Range(1, 9));

TEST(AllgatherLarge, FourMiB) { check_allgather(5, {1 << 20, 0, 3 << 20, 1, 1 << 19}, 0); }
