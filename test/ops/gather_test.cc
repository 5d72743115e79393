// Linear gatherv to every root, with zero-size blocks, root block in place or copied.
#include <gtest/gtest.h>

#include <random>

#include "inproc_p2p.h"
#include "test_util.h"

namespace {

unsigned char val(int rank, size_t i) { return static_cast<unsigned char>(rank * 29 + i * 3 + 5); }

void check_gather(int n, const std::vector<size_t>& bytes, bool root_in_place) {
  size_t total = 0;
  std::vector<size_t> off;
  for (size_t b : bytes) off.push_back(total), total += b;
  auto world = inproc_world(n);
  inproc_spawn(world, [&](hvds_p2p_t* p) {
    for (int root = 0; root < n; root++) {
      std::vector<unsigned char> mine(bytes[p->rank]), out(total, 0xdd);
      for (size_t i = 0; i < mine.size(); i++) mine[i] = val(p->rank, i);
      const void* send = mine.data();
      if (p->rank == root && root_in_place) {
        std::copy(mine.begin(), mine.end(), out.begin() + off[root]);
        send = nullptr;
      }
      hvds_coll_opts_t o = {static_cast<uint64_t>(root), HVDS_ALGO_AUTO, 0, 0};
      ASSERT_EQ(
          hvds__gatherv(p, send, p->rank == root ? out.data() : nullptr, bytes.data(), root, &o),
          HVDS_SUCCESS)
          << p->error;
      if (p->rank != root) continue;
      for (int r = 0; r < n; r++)
        for (size_t i = 0; i < bytes[r]; i++)
          ASSERT_EQ(out[off[r] + i], val(r, i)) << "root " << root << " block " << r;
    }
  });
  EXPECT_EQ(inproc_pending_messages(world.get()), 0u);
}

}  // namespace

class GatherTest : public ::testing::TestWithParam<int> {};

TEST_P(GatherTest, EveryRootWithZeroBlocks) {
  int n = GetParam();
  std::mt19937 rng(n + 7);
  std::vector<size_t> bytes(n);
  for (auto& b : bytes) b = rng() % 3 == 0 ? 0 : rng() % 2000;
  check_gather(n, bytes, false);
  check_gather(n, bytes, true);
  check_gather(n, std::vector<size_t>(n, 0), false);
}

INSTANTIATE_TEST_SUITE_P(Ranks, GatherTest, ::testing::Range(1, 9));
