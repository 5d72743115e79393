// Tests of the Gloo transport shim: N ranks as threads in one process, each on its own Gloo TCP
// device and full mesh over loopback, rendezvousing through an in-memory key-value store. The
// contract every transport keeps is ../common/p2p_contract.h; here what is Gloo's own.
#include "gloo_p2p.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "../common/p2p_contract.h"
#include "../common/rank_threads.h"

namespace hvds_test {
// What this transport's failures say (p2p_contract.h).
const FailureTexts& TransportFailures(CreateFn) {
  static const FailureTexts kGloo = {"rank 0 (127.0.0.1:", "connection closed", "connection closed",
                                     5000.0};
  return kGloo;
}
}  // namespace hvds_test

namespace {

using hvds_test::Clock;
using hvds_test::MsSince;
using Barrier = hvds_test::Barrier;
using hvds_test::P2pContract;
using hvds_test::P2pContractRanks;

void Destroy(hvds_p2p_t* p) {
  if (p == nullptr) return;
  p->ops->destroy(p);  // frees p
}

// Runs fn on size rank threads, each with a connected Gloo communicator.
void Spawn(int size, const hvds_test::RankFn& fn, int timeout_ms = 30000, bool destroy = true) {
  hvds_test::SpawnRanks(size, hvds__gloo_p2p_create, fn, timeout_ms, destroy);
}

// The contract of every transport (../common/p2p_contract.h). Not P2pOwnEngine: Gloo's pairs do
// not buffer a message whose receive is not posted (the send waits for it), abort the process on
// a receive of the wrong size (the runtime agrees on every size before a transport carries it),
// do not always say which pair failed, and a second ring waits until the peer listens again
// (every rank's coordinator does, in the runtime).
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(P2pOwnEngine);
INSTANTIATE_TEST_SUITE_P(Gloo, P2pContract, ::testing::Values(hvds__gloo_p2p_create));
INSTANTIATE_TEST_SUITE_P(Gloo, P2pContractRanks,
                         ::testing::Combine(::testing::Values(hvds__gloo_p2p_create),
                                            ::testing::Values(2, 3, 4)),
                         [](const auto& info) {
                           return "np" + std::to_string(std::get<1>(info.param));
                         });

// Doorbell: ranks that all have work when they go idle ring each other without waiting on the
// bell in between, several times in a row (with a message from every peer between rounds, as the
// runtime's cycle has). A Gloo send completes only into a posted receive, so each ring must
// re-post the receives that the previous rings used up; otherwise the second round's rings
// block on both sides until the timeout. Then a wait still sees a fresh ring and ignores the
// stale ones.
TEST(GlooP2p, DoorbellMutualRingsDoNotBlock) {
  Spawn(
      3,
      [&](int rank, hvds_p2p_t* p, Barrier& barrier) {
        for (uint64_t epoch = 1; epoch <= 4; epoch++) {
          int out = rank, in[3] = {-1, -1, -1};
          hvds_p2p_req_t* reqs[4];
          int n = 0;
          for (int peer = 0; peer < 3; peer++) {
            if (peer == rank) continue;
            ASSERT_EQ(p->ops->irecv(p, peer, &in[peer], 4, 100 + epoch, &reqs[n++]), HVDS_SUCCESS);
            ASSERT_EQ(p->ops->isend(p, peer, &out, 4, 100 + epoch, &reqs[n++]), HVDS_SUCCESS);
          }
          for (int i = 0; i < n; i++) ASSERT_EQ(p->ops->wait(p, reqs[i], 10000), HVDS_SUCCESS);
          for (int peer = 0; peer < 3; peer++) {
            if (peer == rank) continue;
            EXPECT_EQ(in[peer], peer);
          }
          auto t0 = Clock::now();
          ASSERT_EQ(p->ops->bell_ring(p, epoch), HVDS_SUCCESS)
              << "rank " << rank << ": " << p->error;
          EXPECT_LT(MsSince(t0), 5000.0) << "rank " << rank << " epoch " << epoch;
        }
        barrier.Wait();
        if (rank != 1) {  // both others sleep on the bell, as every rank does when idle
          auto t0 = Clock::now();
          EXPECT_EQ(p->ops->bell_wait(p, 5), HVDS_SUCCESS) << p->error;
          EXPECT_GE(MsSince(t0), 150.0);  // the rings of epochs 1-4 did not wake it
        } else {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          EXPECT_EQ(p->ops->bell_ring(p, 5), HVDS_SUCCESS) << p->error;
        }
        barrier.Wait();
      },
      20000);
}

// Two ranks: rank 0's abort reaches rank 1, which must name rank 0.
TEST(GlooP2p, AbortNamesRank) {
  Spawn(2, [&](int rank, hvds_p2p_t* p, Barrier& barrier) {
    int x = 0;
    hvds_p2p_req_t* r;
    if (rank == 0) {
      barrier.Wait();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      p->ops->abort(p);
    } else {
      ASSERT_EQ(p->ops->irecv(p, 0, &x, 4, 1, &r), HVDS_SUCCESS);
      barrier.Wait();
      auto t0 = Clock::now();
      EXPECT_EQ(p->ops->wait(p, r, 30000), HVDS_REMOTE_ERROR);
      EXPECT_LT(MsSince(t0), 5000.0);
      EXPECT_EQ(p->failed_peer, 0);
      EXPECT_EQ(strncmp(p->error, "rank 0 (127.0.0.1:", 18), 0) << p->error;
      EXPECT_NE(strstr(p->error, "connection closed: "), nullptr) << p->error;
    }
  });
}

// Destroying a communicator also releases its peers promptly.
TEST(GlooP2p, DestroyWakesPeers) {
  Spawn(
      2,
      [&](int rank, hvds_p2p_t* p, Barrier& barrier) {
        int x = 0;
        hvds_p2p_req_t* r;
        if (rank == 0) {
          barrier.Wait();
          Destroy(p);
        } else {
          ASSERT_EQ(p->ops->irecv(p, 0, &x, 4, 1, &r), HVDS_SUCCESS);
          barrier.Wait();
          auto t0 = Clock::now();
          EXPECT_EQ(p->ops->wait(p, r, 30000), HVDS_REMOTE_ERROR);
          EXPECT_LT(MsSince(t0), 5000.0);
          EXPECT_EQ(p->failed_peer, 0);
          Destroy(p);
        }
      },
      30000, /*destroy=*/false);
}

// A rank whose peer never shows up fails with HVDS_TIMEOUT and a message.
TEST(GlooP2p, CreateTimesOut) {
  hvds_test::MemKv store;
  hvds_kv_t kv = store.kv();
  hvds_p2p_t* p = nullptr;
  char err[512] = "";
  auto t0 = Clock::now();
  hvds_result_t rc = hvds__gloo_p2p_create(&kv, "lonely", 0, 2, nullptr, nullptr, 500, &p, err,
                                           sizeof(err));
  EXPECT_EQ(rc, HVDS_TIMEOUT) << err;
  EXPECT_EQ(p, nullptr);
  EXPECT_NE(err[0], '\0');
  EXPECT_LT(MsSince(t0), 5000.0);
}

// Gloo sets TCP_NODELAY on every connected socket (checked over this process's descriptors).
TEST(GlooP2p, NagleIsOff) {
  Spawn(3, [](int rank, hvds_p2p_t*, Barrier& barrier) {
    barrier.Wait();
    if (rank == 0) {
      int connected = 0, nodelay = 0;
      DIR* d = opendir("/proc/self/fd");
      ASSERT_NE(d, nullptr);
      while (struct dirent* e = readdir(d)) {
        int fd = atoi(e->d_name);
        int type = 0, on = 0;
        socklen_t len = sizeof(type);
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) continue;
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &sl) != 0) continue;
        connected++;
        len = sizeof(on);
        if (getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, &len) == 0 && on) nodelay++;
      }
      closedir(d);
      EXPECT_GE(connected, 6);  // 3 ranks x 2 pairs
      EXPECT_EQ(nodelay, connected);
    }
    barrier.Wait();
  });
}

}  // namespace
