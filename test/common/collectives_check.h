// Every collective of ops/collectives.h over one communicator, each checked against a serial
// reference: shared by the transport tests (p2p_contract.h, ranks as threads) and the
// shared-memory process tests.
#ifndef HVDS_TEST_COLLECTIVES_CHECK_H_
#define HVDS_TEST_COLLECTIVES_CHECK_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "collectives.h"
#include "p2p.h"
#include "p2p_calls.h"

namespace hvds_test {

// Rank r's allreduce input element i; sums stay exact in float.
inline float CollectiveInput(int r, size_t i) {
  return static_cast<float>((r + 1) * static_cast<int>(i % 13));
}

// Allreduce (every algorithm, sizes 0 to 12 MiB), reduce-scatter with uneven and empty blocks,
// allgatherv, broadcast from every root, alltoallv, gatherv and barriers over p, each checked
// against a serial reference.
inline void RunCollectives(int rank, hvds_p2p_t* p) {
  const int n = p->size;
  const float rank_sum = static_cast<float>(n * (n + 1) / 2);
  uint64_t tag = 1;
  for (hvds_algo_t algo : {HVDS_ALGO_RING, HVDS_ALGO_RHD, HVDS_ALGO_AUTO}) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{1000}, size_t{3} << 20}) {
      std::vector<float> v(count);
      for (size_t i = 0; i < count; i++) v[i] = CollectiveInput(rank, i);
      hvds_coll_opts_t o = {tag++, algo, 256 << 10, 0};
      ASSERT_EQ(hvds__allreduce(p, v.data(), count, HVDS_FLOAT32, HVDS_SUM, &o), HVDS_SUCCESS)
          << p->error;
      for (size_t i = 0; i < count; i++) ASSERT_EQ(v[i], rank_sum * (i % 13)) << i;
    }
  }
  std::vector<size_t> counts(n);
  size_t total = 0;
  for (int r = 0; r < n; r++) total += counts[r] = r == 1 ? 0 : 1000 * (r + 1) + 3;
  std::vector<float> buf(total);
  for (size_t i = 0; i < total; i++) buf[i] = CollectiveInput(rank, i);
  hvds_coll_opts_t o = {tag++, HVDS_ALGO_AUTO, 0, 0};
  ASSERT_EQ(hvds__reducescatter(p, buf.data(), counts.data(), HVDS_FLOAT32, HVDS_SUM, &o),
            HVDS_SUCCESS)
      << p->error;
  size_t off = 0;
  for (int r = 0; r < rank; r++) off += counts[r];
  for (size_t i = off; i < off + counts[rank]; i++) ASSERT_EQ(buf[i], rank_sum * (i % 13));
  std::vector<size_t> bytes(n), boff(n);
  size_t btotal = 0;
  for (int r = 0; r < n; r++) boff[r] = btotal, btotal += bytes[r] = r == 0 ? 0 : 5000 * r + 1;
  std::vector<uint8_t> g(btotal, 0);
  std::vector<uint8_t> mine = Pattern(bytes[rank], rank, -1, 3);
  std::copy(mine.begin(), mine.end(), g.begin() + boff[rank]);
  o.tag = tag++;
  ASSERT_EQ(hvds__allgatherv(p, g.data(), bytes.data(), &o), HVDS_SUCCESS) << p->error;
  for (int r = 0; r < n; r++)
    for (size_t i = 0; i < bytes[r]; i++) ASSERT_EQ(g[boff[r] + i], Byte(r, -1, i, 3));
  for (int root = 0; root < n; root++) {
    for (size_t sz : {size_t{5}, size_t{5} << 20}) {
      std::vector<uint8_t> b = rank == root ? Pattern(sz, root, 0, 4) : std::vector<uint8_t>(sz);
      o.tag = tag++;
      ASSERT_EQ(hvds__broadcast(p, b.data(), sz, root, &o), HVDS_SUCCESS) << p->error;
      ASSERT_TRUE(Matches(b, root, 0, 4));
    }
  }
  // Alltoallv: rank s sends (s + d) * 777 bytes to d (rank 0 to itself: none).
  std::vector<size_t> sb(n), so(n), rb(n), ro(n);
  size_t st = 0, rt = 0;
  for (int d = 0; d < n; d++) {
    sb[d] = static_cast<size_t>(rank + d) * 777, so[d] = st, st += sb[d];
    rb[d] = static_cast<size_t>(d + rank) * 777, ro[d] = rt, rt += rb[d];
  }
  std::vector<uint8_t> send(st), recv(rt, 0xcc);
  for (int d = 0; d < n; d++)
    for (size_t i = 0; i < sb[d]; i++) send[so[d] + i] = Byte(rank, d, i, 5);
  o.tag = tag++;
  ASSERT_EQ(
      hvds__alltoallv(p, send.data(), sb.data(), so.data(), recv.data(), rb.data(), ro.data(), &o),
      HVDS_SUCCESS)
      << p->error;
  for (int s = 0; s < n; s++)
    for (size_t i = 0; i < rb[s]; i++) ASSERT_EQ(recv[ro[s] + i], Byte(s, rank, i, 5));
  int root = n - 1;
  std::vector<uint8_t> gout(rank == root ? btotal : 0);
  o.tag = tag++;
  ASSERT_EQ(
      hvds__gatherv(p, mine.data(), rank == root ? gout.data() : nullptr, bytes.data(), root, &o),
      HVDS_SUCCESS)
      << p->error;
  if (rank == root) {
    for (int r = 0; r < n; r++)
      for (size_t i = 0; i < bytes[r]; i++) ASSERT_EQ(gout[boff[r] + i], Byte(r, -1, i, 3));
  }
  for (int i = 0; i < 5; i++) {
    o.tag = tag++;
    ASSERT_EQ(hvds__barrier(p, &o), HVDS_SUCCESS) << p->error;
  }
}

}  // namespace hvds_test

#endif  // HVDS_TEST_COLLECTIVES_CHECK_H_
