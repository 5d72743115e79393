// The contract of p2p.h, checked alike for every transport (ops/tcp/, ops/shm/, ops/gloo/):
// matching by peer and tag in posting order, receives posted before or after their sends, sizes
// from zero to tens of MiB, bad arguments, the doorbell, and every collective of
// ops/collectives.h on top; and, for the transports that buffer messages themselves
// (P2pOwnEngine), sends that complete before their receives, size mismatches as clean errors,
// the failed peer named and a last message delivered though its sender closed. A transport's test
// binary includes this header in one file and instantiates the suites with its create function(s):
//
//   INSTANTIATE_TEST_SUITE_P(Tcp, P2pContract, ::testing::Values(hvds__tcp_p2p_create));
//   INSTANTIATE_TEST_SUITE_P(Tcp, P2pOwnEngine, ::testing::Values(hvds__tcp_p2p_create));
//   INSTANTIATE_TEST_SUITE_P(Tcp, P2pContractRanks,
//                            ::testing::Combine(::testing::Values(hvds__tcp_p2p_create),
//                                               ::testing::Values(2, 3, 4)));
//
// What only one transport has (TCP_NODELAY, the shared segment, crash detection) stays in that
// transport's own tests.
#ifndef HVDS_TEST_P2P_CONTRACT_H_
#define HVDS_TEST_P2P_CONTRACT_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "collectives.h"
#include "collectives_check.h"
#include "p2p.h"
#include "p2p_calls.h"
#include "rank_threads.h"

namespace hvds_test {

// What a transport's failures say to a peer, and how soon the peer hears of them. Every test
// binary that includes this header defines TransportFailures for the create functions it
// instantiates with.
struct FailureTexts {
  const char* timed_out;  // in a peer's error after rank 0 timed out waiting for it
  const char* aborted;    // in a peer's error after rank 0 aborted
  const char* closed;     // in a peer's error after rank 0 destroyed its communicator
  double notice_ms;       // a peer's pending wait fails within this
};
const FailureTexts& TransportFailures(CreateFn create);

// One transport, two ranks unless a test says otherwise.
class P2pContract : public ::testing::TestWithParam<CreateFn> {
 protected:
  void Run(int size, const RankFn& fn) { SpawnRanks(size, GetParam(), fn); }
  const FailureTexts& Failures() const { return TransportFailures(GetParam()); }
};

// A transport whose engine is ours (tcp, shm): it buffers a message whose receive is not posted
// yet (the send completes), reports a receive of the wrong size as an error, names the peer
// behind every failure, and delivers doorbell rings to a peer that is not listening. Gloo's
// pairs do none of these.
class P2pOwnEngine : public P2pContract {};

// One transport at several rank counts.
class P2pContractRanks : public ::testing::TestWithParam<std::tuple<CreateFn, int>> {
 protected:
  int Size() const { return std::get<1>(GetParam()); }
  void Run(const RankFn& fn) { SpawnRanks(Size(), std::get<0>(GetParam()), fn); }
};

// Every rank exchanges every size with every other rank at once: empty, odd, around a 64-byte
// record and a 4 KiB ring, and several MiB.
TEST_P(P2pContractRanks, AllPairsEverySize) {
  const int n = Size();
  const std::vector<size_t> sizes = {0, 1, 7, 63, 64, 65, 4096, 4160, 65537, 1 << 20, 5 << 20};
  Run([&](int rank, hvds_p2p_t* p, Barrier&) {
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
TEST_P(P2pContractRanks, RingShift) {
  const int n = Size();
  Run([&](int rank, hvds_p2p_t* p, Barrier&) {
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
TEST_P(P2pContractRanks, ManyConcurrentTags) {
  const int n = Size();
  const int kTags = 64;
  Run([&](int rank, hvds_p2p_t* p, Barrier&) {
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

// Every collective of ops/collectives.h over the transport (collectives_check.h).
TEST_P(P2pContractRanks, Collectives) {
  Run([](int rank, hvds_p2p_t* p, Barrier&) { RunCollectives(rank, p); });
}

// Messages with one (peer, tag) arrive in the order posted, independently of other tags.
TEST_P(P2pContract, FifoPerPeerAndTag) {
  Run(2, [](int rank, hvds_p2p_t* p, Barrier&) {
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
TEST_P(P2pContract, LargeMessages) {
  Run(2, [](int rank, hvds_p2p_t* p, Barrier&) {
    const size_t big = size_t{64} << 20;
    std::vector<uint8_t> out = Pattern(big, rank, 1 - rank, 99), in(big, 0);
    auto t0 = Clock::now();
    hvds_p2p_req_t* rr = Irecv(p, 1 - rank, in.data(), big, 5);
    hvds_p2p_req_t* sr = Isend(p, 1 - rank, out.data(), big, 5);
    ASSERT_EQ(Wait(p, rr), HVDS_SUCCESS) << p->error;
    ASSERT_EQ(Wait(p, sr), HVDS_SUCCESS) << p->error;
    if (rank == 0) printf("  64 MiB exchange both ways: %.1f ms\n", MsSince(t0));
    EXPECT_TRUE(Matches(in, 1 - rank, rank, 99));
  });
}

// A large message is half buffered as unexpected when its receive is posted: the buffered part
// is copied and the rest lands in the posted buffer. (A receive for another tag makes the
// transport read it aside; rank 1's doorbell wait keeps it reading meanwhile.)
TEST_P(P2pContract, UnexpectedTakenOverMidway) {
  Run(3, [](int rank, hvds_p2p_t* p, Barrier& gate) {
    const size_t big = size_t{48} << 20;
    if (rank == 0) {
      std::vector<uint8_t> out = Pattern(big, 0, 1, 8);
      int token = 1;
      gate.Wait();
      hvds_p2p_req_t* s = Isend(p, 1, out.data(), big, 9);
      hvds_p2p_req_t* t = Isend(p, 1, &token, sizeof token, 10);
      ASSERT_EQ(Wait(p, s), HVDS_SUCCESS) << p->error;
      ASSERT_EQ(Wait(p, t), HVDS_SUCCESS) << p->error;
      gate.Wait();
    } else if (rank == 2) {
      gate.Wait();
      sleep_ms(5);
      ASSERT_EQ(p->ops->bell_ring(p, 1), HVDS_SUCCESS) << p->error;
      gate.Wait();
    } else {
      int token = 0;
      hvds_p2p_req_t* t = Irecv(p, 0, &token, sizeof token, 10);
      gate.Wait();
      ASSERT_EQ(p->ops->bell_wait(p, 1), HVDS_SUCCESS) << p->error;  // reads rank 0 meanwhile
      std::vector<uint8_t> in(big, 0);
      ASSERT_EQ(Wait(p, Irecv(p, 0, in.data(), big, 9)), HVDS_SUCCESS) << p->error;
      ASSERT_EQ(Wait(p, t), HVDS_SUCCESS) << p->error;
      EXPECT_EQ(token, 1);
      EXPECT_TRUE(Matches(in, 0, 1, 8));
      gate.Wait();
    }
  });
}

// Large payloads whose receives come late wait where they are (parked). A receive with the
// parked tag takes the payload directly; one with a later tag first moves the parked payload
// aside, so a receiver may take messages out of order without a deadlock.
TEST_P(P2pContract, ParkedPayloadsInAndOutOfOrder) {
  Run(2, [](int rank, hvds_p2p_t* p, Barrier& gate) {
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
TEST_P(P2pContract, ReceivePostedFirst) {
  Run(2, [](int rank, hvds_p2p_t* p, Barrier& gate) {
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
TEST_P(P2pContract, ZeroBytesSynchronise) {
  Run(2, [](int rank, hvds_p2p_t* p, Barrier& gate) {
    gate.Wait();
    if (rank == 1) {
      sleep_ms(300);
      EXPECT_EQ(Wait(p, Isend(p, 0, nullptr, 0, 3)), HVDS_SUCCESS) << p->error;
    } else {
      auto t0 = Clock::now();
      EXPECT_EQ(Wait(p, Irecv(p, 1, nullptr, 0, 3)), HVDS_SUCCESS) << p->error;
      EXPECT_GE(MsSince(t0), 200.0);
    }
  });
}

// Bad arguments fail the call, leave *req NULL, and do not fail the communicator.
TEST_P(P2pContract, BadArguments) {
  Run(2, [](int rank, hvds_p2p_t* p, Barrier&) {
    hvds_p2p_req_t* r = reinterpret_cast<hvds_p2p_req_t*>(1);
    int x = 0;
    EXPECT_EQ(p->ops->isend(p, rank, &x, 4, 0, &r), HVDS_INVALID_ARGUMENT);  // self
    EXPECT_EQ(r, nullptr);
    EXPECT_EQ(p->ops->isend(p, 2, &x, 4, 0, &r), HVDS_INVALID_ARGUMENT);
    EXPECT_EQ(p->ops->irecv(p, -1, &x, 4, 0, &r), HVDS_INVALID_ARGUMENT);
    EXPECT_EQ(p->ops->irecv(p, 1 - rank, nullptr, 4, 0, &r), HVDS_INVALID_ARGUMENT);
    EXPECT_EQ(p->ops->wait(p, nullptr, -1), HVDS_INVALID_ARGUMENT);
    EXPECT_EQ(p->failed_peer, -1);
  });
}

// One rank: no peer to send to, the doorbell answers at once, collectives are local.
TEST_P(P2pContract, SingleRank) {
  Run(1, [](int, hvds_p2p_t* p, Barrier&) {
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

// Doorbell rings travel between data messages without disturbing them.
TEST_P(P2pContract, DoorbellAmidData) {
  Run(2, [](int rank, hvds_p2p_t* p, Barrier&) {
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
// before the wait ends the next wait at once; once consumed, the next wait sleeps until a ring.
TEST_P(P2pContract, DoorbellInterrupt) {
  Run(2, [](int rank, hvds_p2p_t* p, Barrier& gate) {
    if (rank == 0) {
      std::thread waker([p] {
        sleep_ms(150);
        p->ops->bell_interrupt(p);
      });
      auto t0 = Clock::now();
      EXPECT_EQ(p->ops->bell_wait(p, 1), HVDS_IN_PROGRESS);
      EXPECT_GE(MsSince(t0), 100.0);
      EXPECT_LT(MsSince(t0), 1000.0);
      waker.join();
      p->ops->bell_interrupt(p);
      t0 = Clock::now();
      EXPECT_EQ(p->ops->bell_wait(p, 1), HVDS_IN_PROGRESS);
      EXPECT_LT(MsSince(t0), 50.0);
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

// A wait that times out names the peer; the communicator stays failed, and later calls fail
// fast with the same error; the peer learns of it, naming this rank.
TEST_P(P2pContract, TimeoutNamesPeer) {
  const FailureTexts& f = Failures();
  Run(2, [&f](int rank, hvds_p2p_t* p, Barrier& gate) {
    int x = 0;
    hvds_p2p_req_t* r;
    if (rank == 0) {
      auto t0 = Clock::now();
      EXPECT_EQ(Wait(p, Irecv(p, 1, &x, 4, 1), 300), HVDS_TIMEOUT);
      EXPECT_GE(MsSince(t0), 250.0);
      EXPECT_NE(strstr(p->error, "timed out after 300 ms waiting for rank 1"), nullptr) << p->error;
      EXPECT_EQ(p->failed_peer, 1);
      std::string first = p->error;
      EXPECT_EQ(p->ops->isend(p, 1, &x, 4, 1, &r), HVDS_TIMEOUT);
      EXPECT_EQ(first, p->error);
    } else {
      auto t0 = Clock::now();
      EXPECT_EQ(Wait(p, Irecv(p, 0, &x, 4, 2), 20000), HVDS_REMOTE_ERROR);
      EXPECT_LT(MsSince(t0), f.notice_ms + 300);
      EXPECT_EQ(p->failed_peer, 0) << p->error;
      EXPECT_NE(strstr(p->error, f.timed_out), nullptr) << p->error;
    }
    gate.Wait();
  });
}

// After one rank aborts (from another thread), its own pending wait fails, later calls fail
// fast, and its peers' pending waits fail soon after (the other survivor may have closed on a
// peer first, so which rank a survivor names is not fixed).
TEST_P(P2pContract, AbortWakesPeers) {
  const FailureTexts& f = Failures();
  std::atomic<int64_t> abort_at{0};
  Run(3, [&](int rank, hvds_p2p_t* p, Barrier& gate) {
    int x = 0, y = 0;
    if (rank == 0) {
      hvds_p2p_req_t* r = Irecv(p, 1, &x, 4, 1);
      gate.Wait();
      sleep_ms(200);
      abort_at = Clock::now().time_since_epoch().count();
      std::thread aborter([p] { p->ops->abort(p); });
      aborter.join();
      EXPECT_EQ(Wait(p, r), HVDS_SHUT_DOWN);
      hvds_p2p_req_t* r2;
      EXPECT_EQ(p->ops->isend(p, 1, &x, 4, 1, &r2), HVDS_SHUT_DOWN);
      p->ops->abort(p);  // twice is fine
    } else {
      hvds_p2p_req_t* r = Irecv(p, 0, &x, 4, 1);
      hvds_p2p_req_t* r2 = Irecv(p, 3 - rank, &y, 4, 1);
      gate.Wait();
      hvds_result_t rc = Wait(p, r, 30000);
      EXPECT_LT((Clock::now().time_since_epoch().count() - abort_at) / 1e6, f.notice_ms);
      EXPECT_EQ(rc, HVDS_REMOTE_ERROR) << p->error;
      EXPECT_NE(strstr(p->error, f.aborted), nullptr) << p->error;
      EXPECT_NE(Wait(p, r2, 30000), HVDS_SUCCESS);
      EXPECT_LT((Clock::now().time_since_epoch().count() - abort_at) / 1e6, f.notice_ms);
    }
  });
}

// An abort from another thread wakes this rank's own pending wait at once.
TEST_P(P2pContract, AbortWakesOwnWait) {
  Run(2, [](int rank, hvds_p2p_t* p, Barrier& gate) {
    int x = 0;
    if (rank == 0) {
      hvds_p2p_req_t* r = Irecv(p, 1, &x, 4, 1);
      std::thread aborter([p] {
        sleep_ms(100);
        p->ops->abort(p);
      });
      auto t0 = Clock::now();
      EXPECT_EQ(Wait(p, r, 30000), HVDS_SHUT_DOWN);
      EXPECT_LT(MsSince(t0), 1000.0);
      aborter.join();
    }
    gate.Wait();
  });
}

// Sends complete long before their receives are posted (buffered as unexpected messages),
// including a 16 MiB one and empty ones; the receiver reads them all while waiting for a later
// message on another tag, then takes them, newest tag first.
TEST_P(P2pOwnEngine, UnexpectedMessages) {
  Run(2, [](int rank, hvds_p2p_t* p, Barrier& gate) {
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

// A peer that sends its last message and destroys its communicator at once: the message is
// still delivered (its tail may still be in flight when the peer is gone), and once the peer is
// gone a receive of anything more fails promptly, saying the peer closed.
TEST_P(P2pOwnEngine, MessageBeforeCloseIsDelivered) {
  const FailureTexts& f = Failures();
  SpawnRanks(
      2, GetParam(),
      [&f](int rank, hvds_p2p_t* p, Barrier& gate) {
        std::vector<uint8_t> out = Pattern(100000, 0, 1, 6), in(100000, 0);
        gate.Wait();  // both connected before rank 0 leaves
        if (rank == 0) {
          ASSERT_EQ(Wait(p, Isend(p, 1, out.data(), out.size(), 1)), HVDS_SUCCESS);
          p->ops->destroy(p);
          gate.Wait();
          return;
        }
        ASSERT_EQ(Wait(p, Irecv(p, 0, in.data(), in.size(), 1)), HVDS_SUCCESS) << p->error;
        EXPECT_TRUE(Matches(in, 0, 1, 6));
        gate.Wait();  // rank 0 is gone
        int x;
        auto t0 = Clock::now();
        EXPECT_EQ(Wait(p, Irecv(p, 0, &x, 4, 2)), HVDS_REMOTE_ERROR);  // nothing more comes
        EXPECT_LT(MsSince(t0), f.notice_ms);
        EXPECT_NE(strstr(p->error, f.closed), nullptr) << p->error;
        p->ops->destroy(p);
      },
      30000, /*destroy=*/false);
}

// A receive whose size differs from the message fails, naming the peer, tag and both sizes.
TEST_P(P2pOwnEngine, SizeMismatch) {
  Run(2, [](int rank, hvds_p2p_t* p, Barrier& gate) {
    char buf[8] = {0};
    if (rank == 0) {
      EXPECT_EQ(Wait(p, Isend(p, 1, buf, 8, 4)), HVDS_SUCCESS);
    } else {
      EXPECT_EQ(Wait(p, Irecv(p, 0, buf, 4, 4)), HVDS_PRECONDITION_ERROR);
      EXPECT_NE(strstr(p->error, "rank 0 sent 8 bytes with tag 4"), nullptr) << p->error;
      EXPECT_NE(strstr(p->error, "expects 4 bytes"), nullptr) << p->error;
      EXPECT_EQ(p->failed_peer, 0);
    }
    gate.Wait();
  });
}

// A peer's abort ends a doorbell wait, naming the peer.
TEST_P(P2pOwnEngine, DoorbellFailsOnPeerAbort) {
  Run(2, [](int rank, hvds_p2p_t* p, Barrier& gate) {
    gate.Wait();
    if (rank == 1) {
      sleep_ms(100);
      p->ops->abort(p);
    } else {
      auto t0 = Clock::now();
      EXPECT_EQ(p->ops->bell_wait(p, 1), HVDS_REMOTE_ERROR);
      EXPECT_LT(MsSince(t0), 1000.0);
      EXPECT_EQ(p->failed_peer, 1) << p->error;
    }
  });
}

// Doorbell: a ring with the awaited epoch wakes the waiter; a stale one does not; rings reach a
// peer that is not listening (rank 2) without blocking the ringer.
TEST_P(P2pOwnEngine, DoorbellEpochs) {
  Run(3, [](int rank, hvds_p2p_t* p, Barrier& gate) {
    if (rank == 0) {
      gate.Wait();
      auto t0 = Clock::now();
      EXPECT_EQ(p->ops->bell_wait(p, 5), HVDS_SUCCESS) << p->error;
      EXPECT_GE(MsSince(t0), 250.0);                     // the stale ring (epoch 4) did not wake it
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

}  // namespace hvds_test

#endif  // HVDS_TEST_P2P_CONTRACT_H_
