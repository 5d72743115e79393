// Tests of the Gloo transport shim: N ranks as threads in one process, each on its own Gloo TCP
// device and full mesh over loopback, rendezvousing through an in-memory key-value store.
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

#include "gloo_p2p.h"
#ifdef HVDS_TEST_HAVE_ALLREDUCE
#include "collectives.h"
#endif

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

using Barrier = hvds_test::Barrier;

void Destroy(hvds_p2p_t* p) {
  if (p == nullptr) return;
  p->ops->destroy(p);  // frees p
}

// Runs fn on size rank threads, each with a connected Gloo communicator.
void Spawn(int size, const hvds_test::RankFn& fn, int timeout_ms = 30000, bool destroy = true) {
  hvds_test::SpawnRanks(size, hvds__gloo_p2p_create, fn, timeout_ms, destroy);
}

uint8_t Pattern(int from, int to, size_t i, uint64_t salt) {
  return static_cast<uint8_t>(from * 131 + to * 31 + i * 7 + salt * 13 + (i >> 8));
}

void Fill(std::vector<uint8_t>& v, int from, int to, uint64_t salt) {
  for (size_t i = 0; i < v.size(); i++) v[i] = Pattern(from, to, i, salt);
}

bool Check(const std::vector<uint8_t>& v, int from, int to, uint64_t salt) {
  for (size_t i = 0; i < v.size(); i++) {
    if (v[i] != Pattern(from, to, i, salt)) return false;
  }
  return true;
}

hvds_result_t Send(hvds_p2p_t* p, int peer, const void* buf, size_t n, uint64_t tag) {
  hvds_p2p_req_t* r = nullptr;
  hvds_result_t rc = p->ops->isend(p, peer, buf, n, tag, &r);
  return rc != HVDS_SUCCESS ? rc : p->ops->wait(p, r, -1);
}

class GlooRanks : public ::testing::TestWithParam<int> {};

// Every rank sends a series of sizes to every other rank at once.
TEST_P(GlooRanks, AllPairsVariousSizes) {
  const int n = GetParam();
  const std::vector<size_t> sizes = {0, 1, 7, 4096, 65537, 1 << 20};
  Spawn(n, [&](int rank, hvds_p2p_t* p, Barrier&) {
    for (size_t s = 0; s < sizes.size(); s++) {
      std::vector<std::vector<uint8_t>> in(n), out(n);
      std::vector<hvds_p2p_req_t*> reqs;
      for (int peer = 0; peer < n; peer++) {
        if (peer == rank) continue;
        in[peer].assign(sizes[s], 0);
        out[peer].resize(sizes[s]);
        Fill(out[peer], rank, peer, s);
        hvds_p2p_req_t* r;
        ASSERT_EQ(p->ops->irecv(p, peer, in[peer].data(), sizes[s], s, &r), HVDS_SUCCESS);
        reqs.push_back(r);
        ASSERT_EQ(p->ops->isend(p, peer, out[peer].data(), sizes[s], s, &r), HVDS_SUCCESS);
        reqs.push_back(r);
      }
      for (auto* r : reqs) ASSERT_EQ(p->ops->wait(p, r, -1), HVDS_SUCCESS) << p->error;
      for (int peer = 0; peer < n; peer++) {
        if (peer != rank) {
          EXPECT_TRUE(Check(in[peer], peer, rank, s)) << "size " << sizes[s];
        }
      }
    }
  });
}

// Each rank passes a token to the right n-1 times (sendrecv posts both before waiting).
TEST_P(GlooRanks, RingShift) {
  const int n = GetParam();
  Spawn(n, [&](int rank, hvds_p2p_t* p, Barrier&) {
    int right = (rank + 1) % n, left = (rank + n - 1) % n;
    std::vector<int> seen = {rank};
    int token = rank, next = -1;
    for (int step = 0; step < n - 1; step++) {
      hvds_p2p_req_t *rr, *sr;
      ASSERT_EQ(p->ops->irecv(p, left, &next, sizeof(next), 42, &rr), HVDS_SUCCESS);
      ASSERT_EQ(p->ops->isend(p, right, &token, sizeof(token), 42, &sr), HVDS_SUCCESS);
      ASSERT_EQ(p->ops->wait(p, rr, -1), HVDS_SUCCESS) << p->error;
      ASSERT_EQ(p->ops->wait(p, sr, -1), HVDS_SUCCESS) << p->error;
      EXPECT_EQ(next, (rank + n - 1 - step) % n);
      token = next;
    }
  });
}

// Many tags in flight at once; receives posted in the opposite order of the sends.
TEST_P(GlooRanks, ManyConcurrentTags) {
  const int n = GetParam();
  const int kTags = 64;
  Spawn(n, [&](int rank, hvds_p2p_t* p, Barrier&) {
    std::vector<uint64_t> out(kTags), in(static_cast<size_t>(kTags) * n, 0);
    std::vector<hvds_p2p_req_t*> reqs;
    for (int peer = 0; peer < n; peer++) {
      if (peer == rank) continue;
      for (int t = kTags - 1; t >= 0; t--) {
        hvds_p2p_req_t* r;
        uint64_t tag = (uint64_t{7} << 48) | static_cast<uint64_t>(t);
        ASSERT_EQ(p->ops->irecv(p, peer, &in[peer * kTags + t], 8, tag, &r), HVDS_SUCCESS);
        reqs.push_back(r);
      }
    }
    for (int t = 0; t < kTags; t++) out[t] = static_cast<uint64_t>(rank) * 1000 + t;
    for (int peer = 0; peer < n; peer++) {
      if (peer == rank) continue;
      for (int t = 0; t < kTags; t++) {
        hvds_p2p_req_t* r;
        uint64_t tag = (uint64_t{7} << 48) | static_cast<uint64_t>(t);
        ASSERT_EQ(p->ops->isend(p, peer, &out[t], 8, tag, &r), HVDS_SUCCESS);
        reqs.push_back(r);
      }
    }
    for (auto* r : reqs) ASSERT_EQ(p->ops->wait(p, r, -1), HVDS_SUCCESS) << p->error;
    for (int peer = 0; peer < n; peer++) {
      if (peer == rank) continue;
      for (int t = 0; t < kTags; t++) {
        EXPECT_EQ(in[peer * kTags + t], static_cast<uint64_t>(peer) * 1000 + t);
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, GlooRanks, ::testing::Values(2, 3, 4));

// Messages with one (peer, tag) arrive in the order posted, independently of other tags.
TEST(GlooP2p, FifoPerPeerAndTag) {
  Spawn(2, [](int rank, hvds_p2p_t* p, Barrier&) {
    const int kPerTag = 8;
    if (rank == 0) {
      std::vector<int> out(2 * kPerTag);
      std::vector<hvds_p2p_req_t*> reqs;
      for (int i = 0; i < kPerTag; i++) {
        for (int tag = 0; tag < 2; tag++) {
          out[tag * kPerTag + i] = tag * 100 + i;
          hvds_p2p_req_t* r;
          ASSERT_EQ(p->ops->isend(p, 1, &out[tag * kPerTag + i], sizeof(int), 10 + tag, &r),
                    HVDS_SUCCESS);
          reqs.push_back(r);
        }
      }
      for (auto* r : reqs) ASSERT_EQ(p->ops->wait(p, r, -1), HVDS_SUCCESS) << p->error;
    } else {
      std::vector<int> in(2 * kPerTag, -1);
      std::vector<hvds_p2p_req_t*> reqs;
      for (int tag = 1; tag >= 0; tag--) {  // tag 11 first: the other order than sent
        for (int i = 0; i < kPerTag; i++) {
          hvds_p2p_req_t* r;
          ASSERT_EQ(p->ops->irecv(p, 0, &in[tag * kPerTag + i], sizeof(int), 10 + tag, &r),
                    HVDS_SUCCESS);
          reqs.push_back(r);
        }
      }
      for (auto* r : reqs) ASSERT_EQ(p->ops->wait(p, r, -1), HVDS_SUCCESS) << p->error;
      for (int tag = 0; tag < 2; tag++) {
        for (int i = 0; i < kPerTag; i++) EXPECT_EQ(in[tag * kPerTag + i], tag * 100 + i);
      }
    }
  });
}

// 64 MiB each way between two ranks, plus a mix of sizes on one tag.
TEST(GlooP2p, LargeMessages) {
  Spawn(2, [](int rank, hvds_p2p_t* p, Barrier&) {
    const size_t big = size_t{64} << 20;
    std::vector<uint8_t> out(big), in(big, 0);
    Fill(out, rank, 1 - rank, 99);
    hvds_p2p_req_t *rr, *sr;
    auto t0 = Clock::now();
    ASSERT_EQ(p->ops->irecv(p, 1 - rank, in.data(), big, 5, &rr), HVDS_SUCCESS);
    ASSERT_EQ(p->ops->isend(p, 1 - rank, out.data(), big, 5, &sr), HVDS_SUCCESS);
    ASSERT_EQ(p->ops->wait(p, rr, -1), HVDS_SUCCESS) << p->error;
    ASSERT_EQ(p->ops->wait(p, sr, -1), HVDS_SUCCESS) << p->error;
    if (rank == 0) printf("  64 MiB exchange both ways: %.1f ms\n", ms_since(t0));
    EXPECT_TRUE(Check(in, 1 - rank, rank, 99));
  });
}

// A zero-byte message still synchronises: the receive completes only after the send is posted.
TEST(GlooP2p, ZeroBytesSynchronise) {
  Spawn(2, [](int rank, hvds_p2p_t* p, Barrier& barrier) {
    barrier.Wait();
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      EXPECT_EQ(Send(p, 0, nullptr, 0, 3), HVDS_SUCCESS) << p->error;
    } else {
      auto t0 = Clock::now();
      hvds_p2p_req_t* r;
      ASSERT_EQ(p->ops->irecv(p, 1, nullptr, 0, 3, &r), HVDS_SUCCESS);
      EXPECT_EQ(p->ops->wait(p, r, -1), HVDS_SUCCESS) << p->error;
      EXPECT_GE(ms_since(t0), 200.0);
    }
  });
}

TEST(GlooP2p, BadArguments) {
  Spawn(2, [](int rank, hvds_p2p_t* p, Barrier&) {
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

TEST(GlooP2p, SingleRank) {
  Spawn(1, [](int, hvds_p2p_t* p, Barrier&) {
    hvds_p2p_req_t* r;
    int x = 0;
    EXPECT_EQ(p->ops->isend(p, 0, &x, 4, 0, &r), HVDS_INVALID_ARGUMENT);
    p->ops->abort(p);
  });
}

// A wait that times out names the peer; the communicator stays failed; the peer learns of it.
TEST(GlooP2p, TimeoutNamesPeer) {
  Spawn(2, [](int rank, hvds_p2p_t* p, Barrier& barrier) {
    int x = 0;
    hvds_p2p_req_t* r;
    if (rank == 0) {
      ASSERT_EQ(p->ops->irecv(p, 1, &x, 4, 1, &r), HVDS_SUCCESS);
      auto t0 = Clock::now();
      EXPECT_EQ(p->ops->wait(p, r, 300), HVDS_TIMEOUT);
      EXPECT_GE(ms_since(t0), 250.0);
      EXPECT_NE(strstr(p->error, "timed out after 300 ms waiting for rank 1"), nullptr) << p->error;
      EXPECT_EQ(p->failed_peer, 1);
      std::string first = p->error;
      EXPECT_EQ(p->ops->isend(p, 1, &x, 4, 1, &r), HVDS_TIMEOUT);  // fails fast, same error
      EXPECT_EQ(first, p->error);
      barrier.Wait();
    } else {
      ASSERT_EQ(p->ops->irecv(p, 0, &x, 4, 2, &r), HVDS_SUCCESS);
      auto t0 = Clock::now();
      EXPECT_EQ(p->ops->wait(p, r, 20000), HVDS_REMOTE_ERROR);
      EXPECT_LT(ms_since(t0), 5000.0);
      EXPECT_EQ(p->failed_peer, 0);
      EXPECT_NE(strstr(p->error, "rank 0 (127.0.0.1:"), nullptr) << p->error;
      barrier.Wait();
    }
  });
}

// After one rank aborts, its peers' pending receives fail at once and name it; its own pending
// receive fails too; later calls fail fast.
TEST(GlooP2p, AbortWakesPeers) {
  std::atomic<int64_t> abort_at{0};
  Spawn(3, [&](int rank, hvds_p2p_t* p, Barrier& barrier) {
    int x = 0, y = 0;
    hvds_p2p_req_t *r, *r2;
    if (rank == 0) {
      ASSERT_EQ(p->ops->irecv(p, 1, &x, 4, 1, &r), HVDS_SUCCESS);
      barrier.Wait();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      abort_at = Clock::now().time_since_epoch().count();
      std::thread aborter([p] { p->ops->abort(p); });  // from another thread
      aborter.join();
      EXPECT_EQ(p->ops->wait(p, r, -1), HVDS_SHUT_DOWN);
      EXPECT_EQ(p->ops->isend(p, 1, &x, 4, 1, &r), HVDS_SHUT_DOWN);
      p->ops->abort(p);  // twice is fine
    } else {
      ASSERT_EQ(p->ops->irecv(p, 0, &x, 4, 1, &r), HVDS_SUCCESS);
      ASSERT_EQ(p->ops->irecv(p, 3 - rank, &y, 4, 1, &r2), HVDS_SUCCESS);
      barrier.Wait();
      hvds_result_t rc = p->ops->wait(p, r, 30000);
      double ms = (Clock::now().time_since_epoch().count() - abort_at) / 1e6;
      printf("  rank %d: recv from aborted rank 0 failed %.1f ms after abort\n", rank, ms);
      EXPECT_LT(ms, 5000.0);
      // Usually rank 0 itself; the other survivor may have closed on us first.
      EXPECT_EQ(rc, HVDS_REMOTE_ERROR) << p->error;
      EXPECT_NE(strstr(p->error, "connection closed"), nullptr) << p->error;
      EXPECT_NE(p->ops->wait(p, r2, 30000), HVDS_SUCCESS);
      EXPECT_LT((Clock::now().time_since_epoch().count() - abort_at) / 1e6, 5000.0);
    }
  });
}

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
          EXPECT_LT(ms_since(t0), 5000.0) << "rank " << rank << " epoch " << epoch;
        }
        barrier.Wait();
        if (rank != 1) {  // both others sleep on the bell, as every rank does when idle
          auto t0 = Clock::now();
          EXPECT_EQ(p->ops->bell_wait(p, 5), HVDS_SUCCESS) << p->error;
          EXPECT_GE(ms_since(t0), 150.0);  // the rings of epochs 1-4 did not wake it
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
      EXPECT_LT(ms_since(t0), 5000.0);
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
          EXPECT_LT(ms_since(t0), 5000.0);
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
  EXPECT_LT(ms_since(t0), 5000.0);
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

#ifdef HVDS_TEST_HAVE_ALLREDUCE
// One collective from ops/ over the real transport.
TEST(GlooP2p, AllreduceFromOps) {
  Spawn(3, [](int rank, hvds_p2p_t* p, Barrier&) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{1000}, size_t{1} << 20}) {
      std::vector<float> v(count);
      for (size_t i = 0; i < count; i++) v[i] = static_cast<float>(rank + 1) * (i % 17);
      hvds_coll_opts_t o = {};
      o.tag = 77;
      ASSERT_EQ(hvds__allreduce(p, v.data(), count, HVDS_FLOAT32, HVDS_SUM, &o), HVDS_SUCCESS)
          << p->error;
      for (size_t i = 0; i < count; i++) ASSERT_EQ(v[i], 6.0f * (i % 17)) << i;
    }
  });
}
#endif

}  // namespace
