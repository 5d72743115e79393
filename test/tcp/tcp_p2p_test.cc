// Tests of the TCP transport: N ranks as threads in one process, each with its own full mesh of
// real loopback TCP connections, rendezvousing through an in-memory key-value store.
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "../common/rank_threads.h"

#include "collectives.h"
#include "tcp_p2p.h"

#include "tcp_test_util.h"

namespace {

using namespace tcp_test;

class TcpRanks : public ::testing::TestWithParam<int> {};

// Every rank exchanges a series of sizes with every other rank at once.
TEST_P(TcpRanks, AllPairsVariousSizes) {
  const int n = GetParam();
  const std::vector<size_t> sizes = {0, 1, 7, 4096, 65537, 1 << 20};
  RunRanks(n, [&](int rank, hvds_p2p_t* p, Gate&) {
    for (size_t s = 0; s < sizes.size(); s++) {
      std::vector<std::vector<uint8_t>> in(n), out(n);
      std::vector<hvds_p2p_req_t*> reqs;
      for (int peer = 0; peer < n; peer++) {
        if (peer == rank) continue;
        in[peer].assign(sizes[s], 0);
        out[peer] = Pattern(sizes[s], rank, peer, s);
        reqs.push_back(Irecv(p, peer, in[peer].data(), sizes[s], s));
        reqs.push_back(Isend(p, peer, out[peer].data(), sizes[s], s));
      }
      for (auto* r : reqs) ASSERT_EQ(Wait(p, r), HVDS_SUCCESS) << p->error;
      for (int peer = 0; peer < n; peer++) {
        if (peer != rank) {
          EXPECT_TRUE(Matches(in[peer], peer, rank, s)) << "size " << sizes[s];
        }
      }
    }
  });
}

// Each rank passes a token to the right n-1 times, receive and send posted before waiting.
TEST_P(TcpRanks, RingShift) {
  const int n = GetParam();
  RunRanks(n, [&](int rank, hvds_p2p_t* p, Gate&) {
    int right = (rank + 1) % n, left = (rank + n - 1) % n;
    int token = rank, next = -1;
    for (int step = 0; step < n - 1; step++) {
      hvds_p2p_req_t* rr = Irecv(p, left, &next, sizeof next, 42);
      hvds_p2p_req_t* sr = Isend(p, right, &token, sizeof token, 42);
      ASSERT_EQ(Wait(p, rr), HVDS_SUCCESS) << p->error;
      ASSERT_EQ(Wait(p, sr), HVDS_SUCCESS) << p->error;
      EXPECT_EQ(next, (rank + n - 1 - step) % n);
      token = next;
    }
  });
}

// Many tags in flight; receives posted in the opposite order of the sends.
TEST_P(TcpRanks, ManyConcurrentTags) {
  const int n = GetParam();
  const int kTags = 64;
  RunRanks(n, [&](int rank, hvds_p2p_t* p, Gate&) {
    std::vector<uint64_t> out(kTags), in(static_cast<size_t>(kTags) * n, 0);
    std::vector<hvds_p2p_req_t*> reqs;
    for (int peer = 0; peer < n; peer++) {
      if (peer == rank) continue;
      for (int t = kTags - 1; t >= 0; t--)
        reqs.push_back(Irecv(p, peer, &in[peer * kTags + t], 8, (uint64_t{7} << 48) | t));
    }
    for (int t = 0; t < kTags; t++) out[t] = static_cast<uint64_t>(rank) * 1000 + t;
    for (int peer = 0; peer < n; peer++) {
      if (peer == rank) continue;
      for (int t = 0; t < kTags; t++)
        reqs.push_back(Isend(p, peer, &out[t], 8, (uint64_t{7} << 48) | t));
    }
    for (auto* r : reqs) ASSERT_EQ(Wait(p, r), HVDS_SUCCESS) << p->error;
    for (int peer = 0; peer < n; peer++) {
      if (peer == rank) continue;
      for (int t = 0; t < kTags; t++)
        EXPECT_EQ(in[peer * kTags + t], static_cast<uint64_t>(peer) * 1000 + t);
    }
  });
}

// Rank r's allreduce input element i; sums stay exact in float.
float In(int r, size_t i) { return static_cast<float>((r + 1) * static_cast<int>(i % 13)); }

// Every collective of ops/collectives.h over this transport, checked against a serial reference.
TEST_P(TcpRanks, Collectives) {
  const int n = GetParam();
  RunRanks(n, [&](int rank, hvds_p2p_t* p, Gate&) {
    uint64_t tag = 1;
    for (hvds_algo_t algo : {HVDS_ALGO_RING, HVDS_ALGO_RHD, HVDS_ALGO_AUTO}) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{1000}, size_t{3} << 20}) {
        std::vector<float> v(count);
        for (size_t i = 0; i < count; i++) v[i] = In(rank, i);
        hvds_coll_opts_t o = {tag++, algo, 256 << 10, 0};
        ASSERT_EQ(hvds__allreduce(p, v.data(), count, HVDS_FLOAT32, HVDS_SUM, &o), HVDS_SUCCESS)
            << p->error;
        float k = static_cast<float>(n * (n + 1) / 2);
        for (size_t i = 0; i < count; i++) ASSERT_EQ(v[i], k * (i % 13)) << i;
      }
    }
    // Reduce-scatter with uneven blocks (one empty).
    std::vector<size_t> counts(n);
    size_t total = 0;
    for (int r = 0; r < n; r++) total += counts[r] = r == 1 ? 0 : 1000 * (r + 1) + 3;
    std::vector<float> buf(total);
    for (size_t i = 0; i < total; i++) buf[i] = In(rank, i);
    hvds_coll_opts_t o = {tag++, HVDS_ALGO_AUTO, 0, 0};
    ASSERT_EQ(hvds__reducescatter(p, buf.data(), counts.data(), HVDS_FLOAT32, HVDS_SUM, &o),
              HVDS_SUCCESS)
        << p->error;
    size_t off = 0;
    for (int r = 0; r < rank; r++) off += counts[r];
    for (size_t i = off; i < off + counts[rank]; i++)
      ASSERT_EQ(buf[i], static_cast<float>(n * (n + 1) / 2) * (i % 13));
    // Allgatherv of variable blocks.
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
    // Broadcast from every root, small and pipelined.
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
    ASSERT_EQ(hvds__alltoallv(p, send.data(), sb.data(), so.data(), recv.data(), rb.data(),
                              ro.data(), &o),
              HVDS_SUCCESS)
        << p->error;
    for (int s = 0; s < n; s++)
      for (size_t i = 0; i < rb[s]; i++) ASSERT_EQ(recv[ro[s] + i], Byte(s, rank, i, 5));
    // Gatherv to the last rank.
    int root = n - 1;
    std::vector<uint8_t> gout(rank == root ? btotal : 0);
    o.tag = tag++;
    ASSERT_EQ(hvds__gatherv(p, mine.data(), rank == root ? gout.data() : nullptr, bytes.data(),
                            root, &o),
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
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, TcpRanks, ::testing::Values(2, 3, 4));

// Messages with one (peer, tag) arrive in the order posted, independently of other tags.
TEST(TcpP2p, FifoPerPeerAndTag) {
  RunRanks(2, [](int rank, hvds_p2p_t* p, Gate&) {
    const int kPerTag = 16, kTags = 5;
    std::vector<int> buf(kTags * kPerTag, -1);
    std::vector<hvds_p2p_req_t*> reqs;
    if (rank == 0) {
      for (int i = 0; i < kPerTag; i++)
        for (int t = 0; t < kTags; t++) {
          buf[t * kPerTag + i] = t * 100 + i;
          reqs.push_back(Isend(p, 1, &buf[t * kPerTag + i], sizeof(int), 10 + t));
        }
    } else {
      for (int t = kTags - 1; t >= 0; t--)  // the other order than sent
        for (int i = 0; i < kPerTag; i++)
          reqs.push_back(Irecv(p, 0, &buf[t * kPerTag + i], sizeof(int), 10 + t));
    }
    for (auto* r : reqs) ASSERT_EQ(Wait(p, r), HVDS_SUCCESS) << p->error;
    for (int t = 0; t < kTags; t++)
      for (int i = 0; i < kPerTag; i++) EXPECT_EQ(buf[t * kPerTag + i], t * 100 + i);
  });
}

// 64 MiB each way between two ranks.
TEST(TcpP2p, LargeMessages) {
  RunRanks(2, [](int rank, hvds_p2p_t* p, Gate&) {
    const size_t big = size_t{64} << 20;
    std::vector<uint8_t> out = Pattern(big, rank, 1 - rank, 99), in(big, 0);
    auto t0 = Clock::now();
    hvds_p2p_req_t* rr = Irecv(p, 1 - rank, in.data(), big, 5);
    hvds_p2p_req_t* sr = Isend(p, 1 - rank, out.data(), big, 5);
    ASSERT_EQ(Wait(p, rr), HVDS_SUCCESS) << p->error;
    ASSERT_EQ(Wait(p, sr), HVDS_SUCCESS) << p->error;
    if (rank == 0) printf("  64 MiB exchange both ways: %.1f ms\n", ms_since(t0));
    EXPECT_TRUE(Matches(in, 1 - rank, rank, 99));
  });
}

// Sends complete long before their receives are posted (buffered as unexpected messages),
// including a 16 MiB one and empty ones; the receiver reads them all while waiting for a later
// message on another tag.
TEST(TcpP2p, UnexpectedMessages) {
  RunRanks(2, [](int rank, hvds_p2p_t* p, Gate& gate) {
    const std::vector<size_t> sizes = {0, 1, 4096, size_t{16} << 20, 0, 33};
    if (rank == 0) {
      std::vector<std::vector<uint8_t>> out;
      for (size_t i = 0; i < sizes.size(); i++) out.push_back(Pattern(sizes[i], 0, 1, i));
      for (size_t i = 0; i < sizes.size(); i++)
        ASSERT_EQ(Wait(p, Isend(p, 1, out[i].data(), sizes[i], 100 + i % 2)), HVDS_SUCCESS);
      int last = 7;
      ASSERT_EQ(Wait(p, Isend(p, 1, &last, sizeof last, 200)), HVDS_SUCCESS) << p->error;
      gate.Wait();
    } else {
      int last = 0;
      ASSERT_EQ(Wait(p, Irecv(p, 0, &last, sizeof last, 200)), HVDS_SUCCESS) << p->error;
      EXPECT_EQ(last, 7);
      gate.Wait();
      sleep_ms(50);
      for (int parity = 1; parity >= 0; parity--) {
        for (size_t i = parity; i < sizes.size(); i += 2) {
          std::vector<uint8_t> in(sizes[i], 0xee);
          ASSERT_EQ(Wait(p, Irecv(p, 0, in.data(), sizes[i], 100 + parity)), HVDS_SUCCESS)
              << p->error;
          EXPECT_TRUE(Matches(in, 0, 1, i)) << "message " << i;
        }
      }
    }
  });
}

// A large message is being buffered as unexpected when its receive is posted: the part already
// buffered is copied and the rest lands in the posted buffer.
TEST(TcpP2p, UnexpectedTakenOverMidway) {
  RunRanks(3, [](int rank, hvds_p2p_t* p, Gate& gate) {
    const size_t big = size_t{48} << 20;
    if (rank == 0) {
      std::vector<uint8_t> out = Pattern(big, 0, 1, 8);
      gate.Wait();
      ASSERT_EQ(Wait(p, Isend(p, 1, out.data(), big, 9)), HVDS_SUCCESS) << p->error;
      gate.Wait();
    } else if (rank == 2) {
      gate.Wait();
      sleep_ms(3);
      ASSERT_EQ(p->ops->bell_ring(p, 1), HVDS_SUCCESS) << p->error;
      gate.Wait();
    } else {
      gate.Wait();
      ASSERT_EQ(p->ops->bell_wait(p, 1), HVDS_SUCCESS) << p->error;  // reads rank 0 meanwhile
      std::vector<uint8_t> in(big, 0);
      ASSERT_EQ(Wait(p, Irecv(p, 0, in.data(), big, 9)), HVDS_SUCCESS) << p->error;
      EXPECT_TRUE(Matches(in, 0, 1, 8));
      gate.Wait();
    }
  });
}

// Large payloads whose receives come late wait unread in the kernel (parked). A receive with the
// parked tag takes the payload directly; one with a later tag first moves the parked payload
// aside, so a receiver may take messages out of order without a deadlock.
TEST(TcpP2p, ParkedPayloadsInAndOutOfOrder) {
  RunRanks(2, [](int rank, hvds_p2p_t* p, Gate& gate) {
    const size_t big = size_t{4} << 20;
    if (rank == 0) {
      std::vector<std::vector<uint8_t>> out;
      for (int i = 0; i < 4; i++) out.push_back(Pattern(big + i, 0, 1, i));
      std::vector<hvds_p2p_req_t*> sends;
      for (int i = 0; i < 4; i++) sends.push_back(Isend(p, 1, out[i].data(), big + i, 20 + i));
      for (hvds_p2p_req_t* s : sends) ASSERT_EQ(Wait(p, s), HVDS_SUCCESS) << p->error;
      gate.Wait();
    } else {
      sleep_ms(50);  // message 0 has arrived and parked
      std::vector<uint8_t> in(big, 0);
      ASSERT_EQ(Wait(p, Irecv(p, 0, in.data(), big, 20)), HVDS_SUCCESS) << p->error;
      EXPECT_TRUE(Matches(in, 0, 1, 0));
      sleep_ms(20);  // message 1 parks; ask for 3 first, then 2, then 1
      for (int i : {3, 2, 1}) {
        std::vector<uint8_t> got(big + i, 0);
        ASSERT_EQ(Wait(p, Irecv(p, 0, got.data(), big + i, 20 + i)), HVDS_SUCCESS) << p->error;
        EXPECT_TRUE(Matches(got, 0, 1, i)) << "message " << i;
      }
      gate.Wait();
    }
  });
}

// The receive is posted well before the send.
TEST(TcpP2p, ReceivePostedFirst) {
  RunRanks(2, [](int rank, hvds_p2p_t* p, Gate& gate) {
    std::vector<uint8_t> out = Pattern(1 << 20, 0, 1, 1), in(1 << 20, 0);
    if (rank == 1) {
      hvds_p2p_req_t* r = Irecv(p, 0, in.data(), in.size(), 3);
      gate.Wait();
      ASSERT_EQ(Wait(p, r), HVDS_SUCCESS) << p->error;
      EXPECT_TRUE(Matches(in, 0, 1, 1));
    } else {
      gate.Wait();
      sleep_ms(100);
      ASSERT_EQ(Wait(p, Isend(p, 1, out.data(), out.size(), 3)), HVDS_SUCCESS) << p->error;
    }
  });
}

// A zero-byte message still synchronises: the receive completes only after the send.
TEST(TcpP2p, ZeroBytesSynchronise) {
  RunRanks(2, [](int rank, hvds_p2p_t* p, Gate& gate) {
    gate.Wait();
    if (rank == 1) {
      sleep_ms(300);
      EXPECT_EQ(Wait(p, Isend(p, 0, nullptr, 0, 3)), HVDS_SUCCESS) << p->error;
    } else {
      auto t0 = Clock::now();
      EXPECT_EQ(Wait(p, Irecv(p, 1, nullptr, 0, 3)), HVDS_SUCCESS) << p->error;
      EXPECT_GE(ms_since(t0), 200.0);
    }
  });
}

// A receive whose size differs from the message fails, naming the peer, tag and both sizes.
TEST(TcpP2p, SizeMismatch) {
  RunRanks(2, [](int rank, hvds_p2p_t* p, Gate& gate) {
    char buf[8] = {0};
    if (rank == 0) {
      EXPECT_EQ(Wait(p, Isend(p, 1, buf, 8, 4)), HVDS_SUCCESS);
      gate.Wait();
    } else {
      EXPECT_EQ(Wait(p, Irecv(p, 0, buf, 4, 4)), HVDS_PRECONDITION_ERROR);
      EXPECT_NE(strstr(p->error, "rank 0 sent 8 bytes with tag 4"), nullptr) << p->error;
      EXPECT_NE(strstr(p->error, "expects 4 bytes"), nullptr) << p->error;
      EXPECT_EQ(p->failed_peer, 0);
      gate.Wait();
    }
  });
}

TEST(TcpP2p, BadArguments) {
  RunRanks(2, [](int rank, hvds_p2p_t* p, Gate&) {
    hvds_p2p_req_t* r = reinterpret_cast<hvds_p2p_req_t*>(1);
    int x = 0;
    EXPECT_EQ(p->ops->isend(p, rank, &x, 4, 0, &r), HVDS_INVALID_ARGUMENT);  // self
    EXPECT_EQ(r, nullptr);
    EXPECT_EQ(p->ops->isend(p, 2, &x, 4, 0, &r), HVDS_INVALID_ARGUMENT);
    EXPECT_EQ(p->ops->irecv(p, -1, &x, 4, 0, &r), HVDS_INVALID_ARGUMENT);
    EXPECT_EQ(p->ops->irecv(p, 1 - rank, nullptr, 4, 0, &r), HVDS_INVALID_ARGUMENT);
    EXPECT_EQ(p->ops->wait(p, nullptr, -1), HVDS_INVALID_ARGUMENT);
    EXPECT_EQ(p->failed_peer, -1);  // argument errors do not fail the communicator
  });
}

TEST(TcpP2p, SingleRank) {
  RunRanks(1, [](int, hvds_p2p_t* p, Gate&) {
    hvds_p2p_req_t* r;
    int x = 0;
    EXPECT_EQ(p->ops->isend(p, 0, &x, 4, 0, &r), HVDS_INVALID_ARGUMENT);
    p->ops->bell_interrupt(p);
    EXPECT_EQ(p->ops->bell_wait(p, 1), HVDS_IN_PROGRESS);
    EXPECT_EQ(p->ops->bell_ring(p, 1), HVDS_SUCCESS);
    hvds_coll_opts_t o = {1, HVDS_ALGO_AUTO, 0, 0};
    float v = 3;
    EXPECT_EQ(hvds__allreduce(p, &v, 1, HVDS_FLOAT32, HVDS_SUM, &o), HVDS_SUCCESS) << p->error;
    p->ops->abort(p);
  });
}

// A wait that times out names the peer; the communicator stays failed; the peer learns of it.
TEST(TcpP2p, NagleIsOff) {
  RunRanks(3, [](int rank, hvds_p2p_t*, Gate& gate) {
    gate.Wait();
    if (rank == 0) {
      int connected = 0, nodelay = 0;
      DIR* d = opendir("/proc/self/fd");
      ASSERT_NE(d, nullptr);
      while (struct dirent* e = readdir(d)) {
        int fd = atoi(e->d_name), type = 0, on = 0;
        socklen_t len = sizeof type;
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) continue;
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &sl) != 0) continue;
        connected++;
        len = sizeof on;
        if (getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, &len) == 0 && on) nodelay++;
      }
      closedir(d);
      EXPECT_GE(connected, 6);  // 3 ranks x 2 connections
      EXPECT_EQ(nodelay, connected);
    }
    gate.Wait();
  });
}

// Doorbell: a ring with the awaited epoch wakes the waiter; a stale one does not.
TEST(TcpP2p, DoorbellEpochs) {
  RunRanks(3, [](int rank, hvds_p2p_t* p, Gate& gate) {
    if (rank == 0) {
      gate.Wait();
      auto t0 = Clock::now();
      EXPECT_EQ(p->ops->bell_wait(p, 5), HVDS_SUCCESS) << p->error;
      EXPECT_GE(ms_since(t0), 250.0);  // the stale ring (epoch 4) did not wake it
      EXPECT_EQ(p->ops->bell_wait(p, 5), HVDS_SUCCESS);  // a ring is remembered
    } else if (rank == 1) {
      gate.Wait();
      sleep_ms(50);
      EXPECT_EQ(p->ops->bell_ring(p, 4), HVDS_SUCCESS) << p->error;
      sleep_ms(250);
      EXPECT_EQ(p->ops->bell_ring(p, 5), HVDS_SUCCESS) << p->error;
    } else {
      gate.Wait();
    }
    gate.Wait();
  });
}

// Doorbell rings travel between data messages without disturbing them.
TEST(TcpP2p, DoorbellAmidData) {
  RunRanks(2, [](int rank, hvds_p2p_t* p, Gate&) {
    std::vector<uint8_t> out = Pattern(3 << 20, rank, 1 - rank, 2), in(3 << 20, 0);
    if (rank == 0) {
      hvds_p2p_req_t* s = Isend(p, 1, out.data(), out.size(), 8);
      ASSERT_EQ(p->ops->bell_ring(p, 11), HVDS_SUCCESS) << p->error;
      ASSERT_EQ(Wait(p, s), HVDS_SUCCESS) << p->error;
      ASSERT_EQ(Wait(p, Irecv(p, 1, in.data(), in.size(), 8)), HVDS_SUCCESS) << p->error;
    } else {
      ASSERT_EQ(p->ops->bell_wait(p, 11), HVDS_SUCCESS) << p->error;
      ASSERT_EQ(Wait(p, Irecv(p, 0, in.data(), in.size(), 8)), HVDS_SUCCESS) << p->error;
      ASSERT_EQ(Wait(p, Isend(p, 0, out.data(), out.size(), 8)), HVDS_SUCCESS) << p->error;
    }
    EXPECT_TRUE(Matches(in, 1 - rank, rank, 2));
  });
}

// bell_interrupt from another thread ends a wait with HVDS_IN_PROGRESS; an interrupt that came
// before the wait ends the next wait at once.
TEST(TcpP2p, DoorbellInterrupt) {
  RunRanks(2, [](int rank, hvds_p2p_t* p, Gate& gate) {
    if (rank == 0) {
      std::thread waker([p] {
        sleep_ms(150);
        p->ops->bell_interrupt(p);
      });
      auto t0 = Clock::now();
      EXPECT_EQ(p->ops->bell_wait(p, 1), HVDS_IN_PROGRESS);
      EXPECT_GE(ms_since(t0), 100.0);
      EXPECT_LT(ms_since(t0), 1000.0);
      waker.join();
      p->ops->bell_interrupt(p);
      t0 = Clock::now();
      EXPECT_EQ(p->ops->bell_wait(p, 1), HVDS_IN_PROGRESS);
      EXPECT_LT(ms_since(t0), 50.0);
      // Consumed: the next wait sleeps until a ring.
      gate.Wait();
      EXPECT_EQ(p->ops->bell_wait(p, 1), HVDS_SUCCESS);
    } else {
      gate.Wait();
      sleep_ms(100);
      EXPECT_EQ(p->ops->bell_ring(p, 1), HVDS_SUCCESS);
    }
    gate.Wait();
  });
}

// A peer's abort ends a doorbell wait with its name.
TEST(TcpP2p, DoorbellFailsOnPeerAbort) {
  RunRanks(2, [](int rank, hvds_p2p_t* p, Gate& gate) {
    gate.Wait();
    if (rank == 1) {
      sleep_ms(100);
      p->ops->abort(p);
    } else {
      auto t0 = Clock::now();
      EXPECT_EQ(p->ops->bell_wait(p, 1), HVDS_REMOTE_ERROR);
      EXPECT_LT(ms_since(t0), 1000.0);
      EXPECT_EQ(p->failed_peer, 1);
    }
  });
}

}  // namespace
