// Failures of the TCP transport: a silent peer times out naming it, abort and destroy wake every
// waiter on both sides, a message sent before close still arrives, and creation fails clearly.
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

TEST(TcpP2p, TimeoutNamesPeer) {
  RunRanks(2, [](int rank, hvds_p2p_t* p, Gate& gate) {
    int x = 0;
    hvds_p2p_req_t* r;
    if (rank == 0) {
      auto t0 = Clock::now();
      EXPECT_EQ(Wait(p, Irecv(p, 1, &x, 4, 1), 300), HVDS_TIMEOUT);
      EXPECT_GE(ms_since(t0), 290.0);
      EXPECT_NE(strstr(p->error, "timed out after 300 ms waiting for rank 1"), nullptr) << p->error;
      EXPECT_EQ(p->failed_peer, 1);
      std::string first = p->error;
      EXPECT_EQ(p->ops->isend(p, 1, &x, 4, 1, &r), HVDS_TIMEOUT);  // fails fast, same error
      EXPECT_EQ(first, p->error);
    } else {
      auto t0 = Clock::now();
      EXPECT_EQ(Wait(p, Irecv(p, 0, &x, 4, 2), 20000), HVDS_REMOTE_ERROR);
      EXPECT_LT(ms_since(t0), 1300.0);
      EXPECT_EQ(p->failed_peer, 0);
      EXPECT_NE(strstr(p->error, "rank 0 (127.0.0.1:"), nullptr) << p->error;
    }
    gate.Wait();
  });
}

// After one rank aborts (from another thread), its peers' pending waits fail within 1 s; its own
// pending wait fails too; later calls fail fast.
TEST(TcpP2p, AbortWakesPeers) {
  std::atomic<int64_t> abort_at{0};
  RunRanks(3, [&](int rank, hvds_p2p_t* p, Gate& gate) {
    int x = 0, y = 0;
    if (rank == 0) {
      hvds_p2p_req_t* r = Irecv(p, 1, &x, 4, 1);
      gate.Wait();
      sleep_ms(200);
      abort_at = Clock::now().time_since_epoch().count();
      std::thread aborter([p] { p->ops->abort(p); });
      aborter.join();
      EXPECT_EQ(Wait(p, r), HVDS_SHUT_DOWN);
      EXPECT_NE(strstr(p->error, "aborted"), nullptr) << p->error;
      hvds_p2p_req_t* r2;
      EXPECT_EQ(p->ops->isend(p, 1, &x, 4, 1, &r2), HVDS_SHUT_DOWN);
      p->ops->abort(p);  // twice is fine
    } else {
      hvds_p2p_req_t* r = Irecv(p, 0, &x, 4, 1);
      hvds_p2p_req_t* r2 = Irecv(p, 3 - rank, &y, 4, 1);
      gate.Wait();
      hvds_result_t rc = Wait(p, r, 30000);
      double ms = (Clock::now().time_since_epoch().count() - abort_at) / 1e6;
      EXPECT_LT(ms, 1000.0);
      EXPECT_EQ(rc, HVDS_REMOTE_ERROR) << p->error;
      EXPECT_NE(strstr(p->error, "connection closed"), nullptr) << p->error;
      EXPECT_NE(Wait(p, r2, 30000), HVDS_SUCCESS);
      EXPECT_LT((Clock::now().time_since_epoch().count() - abort_at) / 1e6, 1000.0);
    }
  });
}

// A receive from rank 0 posted before the gate fails within 1 s of rank 0 going away after it,
// with an error that names rank 0 by its address.
void ExpectRankZeroFailsAPendingReceive(hvds_p2p_t* p, Gate& gate) {
  int x = 0;
  hvds_p2p_req_t* r = Irecv(p, 0, &x, 4, 1);
  gate.Wait();
  auto t0 = Clock::now();
  EXPECT_EQ(Wait(p, r, 30000), HVDS_REMOTE_ERROR);
  EXPECT_LT(ms_since(t0), 1000.0);
  EXPECT_EQ(p->failed_peer, 0);
  EXPECT_EQ(strncmp(p->error, "rank 0 (127.0.0.1:", 18), 0) << p->error;
}

// Two ranks: rank 0's abort reaches rank 1, which names rank 0.
TEST(TcpP2p, AbortNamesRank) {
  RunRanks(2, [&](int rank, hvds_p2p_t* p, Gate& gate) {
    if (rank == 0) {
      gate.Wait();
      sleep_ms(100);
      p->ops->abort(p);
    } else {
      ExpectRankZeroFailsAPendingReceive(p, gate);
      EXPECT_NE(strstr(p->error, "connection closed: "), nullptr) << p->error;
    }
  });
}

// An abort from another thread wakes this rank's own pending wait at once.
TEST(TcpP2p, AbortWakesOwnWait) {
  RunRanks(2, [&](int rank, hvds_p2p_t* p, Gate& gate) {
    int x = 0;
    if (rank == 0) {
      hvds_p2p_req_t* r = Irecv(p, 1, &x, 4, 1);
      std::thread aborter([p] {
        sleep_ms(100);
        p->ops->abort(p);
      });
      auto t0 = Clock::now();
      EXPECT_EQ(Wait(p, r, 30000), HVDS_SHUT_DOWN);
      EXPECT_LT(ms_since(t0), 1000.0);
      aborter.join();
    }
    gate.Wait();
  });
}

// Destroying a communicator mid-way releases its peers promptly.
TEST(TcpP2p, DestroyWakesPeers) {
  RunRanks(
      3,
      [&](int rank, hvds_p2p_t* p, Gate& gate) {
        if (rank == 0) {
          gate.Wait();
          sleep_ms(100);
          p->ops->destroy(p);
        } else {
          ExpectRankZeroFailsAPendingReceive(p, gate);
          p->ops->destroy(p);
        }
      },
      30000, /*destroy=*/false);
}

// A peer that sent its last message and left: the message is still delivered.
TEST(TcpP2p, MessageBeforeCloseIsDelivered) {
  RunRanks(
      2,
      [&](int rank, hvds_p2p_t* p, Gate& gate) {
        std::vector<uint8_t> out = Pattern(100000, 0, 1, 6), in(100000, 0);
        if (rank == 0) {
          ASSERT_EQ(Wait(p, Isend(p, 1, out.data(), out.size(), 1)), HVDS_SUCCESS);
          p->ops->destroy(p);
          gate.Wait();
        } else {
          gate.Wait();
          sleep_ms(50);
          ASSERT_EQ(Wait(p, Irecv(p, 0, in.data(), in.size(), 1)), HVDS_SUCCESS) << p->error;
          EXPECT_TRUE(Matches(in, 0, 1, 6));
          int x;
          EXPECT_EQ(Wait(p, Irecv(p, 0, &x, 4, 2)), HVDS_REMOTE_ERROR);  // nothing more comes
          p->ops->destroy(p);
        }
      },
      30000, /*destroy=*/false);
}

// A rank whose peer never shows up fails with HVDS_TIMEOUT and a message.
TEST(TcpP2p, CreateTimesOut) {
  hvds_test::MemKv store;
  hvds_kv_t kv = store.kv();
  hvds_p2p_t* p = nullptr;
  char err[512] = "";
  auto t0 = Clock::now();
  EXPECT_EQ(hvds__tcp_p2p_create(&kv, "lonely", 0, 2, nullptr, nullptr, 500, &p, err, sizeof err),
            HVDS_TIMEOUT)
      << err;
  EXPECT_EQ(p, nullptr);
  EXPECT_NE(err[0], '\0');
  EXPECT_LT(ms_since(t0), 5000.0);
}

// An unknown interface is refused with a message.
TEST(TcpP2p, CreateBadInterface) {
  hvds_test::MemKv store;
  hvds_kv_t kv = store.kv();
  hvds_p2p_t* p = nullptr;
  char err[512] = "";
  EXPECT_EQ(hvds__tcp_p2p_create(&kv, "x", 0, 2, "nosuchif0", nullptr, 500, &p, err, sizeof err),
            HVDS_INVALID_ARGUMENT);
  EXPECT_NE(strstr(err, "nosuchif0"), nullptr) << err;
}

// Every connection has Nagle off (checked over this process's descriptors).
}  // namespace
