// Tests of the shared-memory transport: N ranks as threads in one process, each attached to the
// job's segment on its own (own descriptor, own liveness lock), rendezvousing through an
// in-memory key-value store. shm_proc_test.cc runs ranks as processes. The contract every
// transport keeps is ../common/p2p_contract.h; here what is the shared segment's own.
#include "shm_p2p.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "../common/p2p_contract.h"
#include "../common/rank_threads.h"
#include "collectives.h"
#include "shm_test_util.h"

namespace hvds_test {
// What this transport's failures say (p2p_contract.h).
const FailureTexts& TransportFailures(CreateFn) {
  static const FailureTexts kShm = {"rank 0 failed: timed out",
                                    "rank 0 failed: communicator aborted on rank 0",
                                    "rank 0 closed", 1000.0};
  return kShm;
}
}  // namespace hvds_test

namespace {

using namespace shm_test;
using Gate = hvds_test::Barrier;
using RankFn = hvds_test::RankFn;
using hvds_test::P2pContract;
using hvds_test::P2pContractRanks;
using hvds_test::P2pOwnEngine;

void RunRanks(int size, const RankFn& fn, int timeout_ms = 30000, bool destroy = true) {
  hvds_test::SpawnRanks(size, hvds__shm_p2p_create, fn, timeout_ms, destroy);
}

// Small rings, so that ordinary sizes exercise wrap-around and streaming.
hvds_result_t CreateSmallRings(const hvds_kv_t* kv, const char* prefix, int rank, int size,
                               const char*, const char*, int timeout_ms, hvds_p2p_t** out,
                               char* err, size_t errlen) {
  hvds_shm_options_t o = HVDS_SHM_OPTIONS_INIT;
  o.ring_bytes = 4096 + 64;
  o.coll_bytes = 4096 + 128;
  return hvds__shm_p2p_create_opts(kv, prefix, rank, size, timeout_ms, &o, out, err, errlen);
}

class ShmRanks : public ::testing::TestWithParam<std::tuple<int, bool>> {
 protected:
  void Run(const RankFn& fn) {
    auto [n, small] = GetParam();
    hvds_test::SpawnRanks(n, small ? CreateSmallRings : hvds__shm_p2p_create, fn);
  }
};

// A fused allreduce straight from and to the tensors: pieces of odd sizes across round
// boundaries (tiny slots), a rank without one tensor (zeros), a result nobody wants (NULL out),
// out of place and in place, against the contiguous allreduce of the same data.
TEST_P(ShmRanks, SegmentAllreducePieces) {
  const int n = std::get<0>(GetParam());
  Run([&](int rank, hvds_p2p_t* p, Gate&) {
    const size_t sizes[] = {1, 0, 1000, 37, size_t{3} << 18, 5};
    const int np = sizeof sizes / sizeof sizes[0];
    std::vector<std::vector<float>> in(np), out(np);
    std::vector<hvds_coll_piece_t> pieces(np);
    std::vector<float> whole;
    for (int t = 0; t < np; t++) {
      in[t].resize(sizes[t]);
      for (size_t i = 0; i < sizes[t]; i++) in[t][i] = In(rank, i + 7 * t);
      bool absent = t == 2 && rank == n - 1;  // this rank contributes zeros to tensor 2
      for (size_t i = 0; i < sizes[t]; i++) whole.push_back(absent ? 0.0f : in[t][i]);
      out[t].assign(sizes[t], -1.0f);
      bool in_place = t % 2 == 1;
      pieces[t] = {absent ? nullptr : in[t].data(),
                   t == 5 ? nullptr : (in_place ? in[t].data() : out[t].data()),
                   sizes[t] * sizeof(float)};
    }
    ASSERT_EQ(hvds__shm_allreduce_pieces(p, pieces.data(), np, HVDS_FLOAT32, HVDS_SUM),
              HVDS_SUCCESS)
        << p->error;
    ASSERT_EQ(hvds__shm_allreduce(p, whole.data(), whole.size(), HVDS_FLOAT32, HVDS_SUM),
              HVDS_SUCCESS)
        << p->error;
    size_t at = 0;
    for (int t = 0; t < np; t++) {
      const std::vector<float>& got = t % 2 == 1 ? in[t] : out[t];
      for (size_t i = 0; i < sizes[t]; i++) {
        if (t == 5)
          ASSERT_EQ(out[t][i], -1.0f) << "an unwanted result was written";
        else
          ASSERT_EQ(got[i], whole[at + i]) << "tensor " << t << " element " << i;
      }
      at += sizes[t];
    }
    hvds_coll_piece_t odd = {in[0].data(), out[0].data(), 3};  // not whole floats
    EXPECT_EQ(hvds__shm_allreduce_pieces(p, &odd, 1, HVDS_FLOAT32, HVDS_SUM),
              HVDS_INVALID_ARGUMENT);
  });
}

// Both kinds of slot writes (shm_store_kind.h), forced in turn, give the same bits: pieces of
// odd lengths at addresses off the streaming stores' alignment, a rank without one tensor, and
// fractional values whose sums depend on the order of the additions; each sum is checked too.
TEST_P(ShmRanks, SegmentAllreduceStoreKindsAgree) {
  const int n = std::get<0>(GetParam());
  Run([&](int rank, hvds_p2p_t* p, Gate&) {
    const size_t sizes[] = {3, size_t{1} << 18, 1001, size_t{5} << 17};  // floats
    const int np = sizeof sizes / sizeof sizes[0];
    auto value = [](int r, size_t i, int t) { return 0.1f * (r + 1) * ((i + t) % 7) + 0.03f; };
    std::vector<std::vector<float>> results;
    for (int kind : {0, 1}) {
      hvds__shm_force_store_kind_for_test(p, kind);
      std::vector<std::vector<float>> in(np), out(np);
      std::vector<hvds_coll_piece_t> pieces(np);
      for (int t = 0; t < np; t++) {
        in[t].resize(sizes[t] + 1);
        for (size_t i = 0; i < sizes[t]; i++) in[t][i + 1] = value(rank, i, t);
        out[t].assign(sizes[t] + 1, -1.0f);
        bool absent = t == 2 && rank == 0;
        pieces[t] = {absent ? nullptr : in[t].data() + 1, out[t].data() + 1,
                     sizes[t] * sizeof(float)};
      }
      ASSERT_EQ(hvds__shm_allreduce_pieces(p, pieces.data(), np, HVDS_FLOAT32, HVDS_SUM),
                HVDS_SUCCESS)
          << p->error;
      std::vector<float> all;
      for (int t = 0; t < np; t++) {
        for (size_t i = 0; i < sizes[t]; i++) {
          float want = 0;
          for (int r = t == 2 ? 1 : 0; r < n; r++) want += value(r, i, t);
          ASSERT_NEAR(out[t][i + 1], want, 1e-5f) << "kind " << kind << " tensor " << t << " " << i;
        }
        all.insert(all.end(), out[t].begin() + 1, out[t].end());
      }
      results.push_back(all);
    }
    hvds__shm_force_store_kind_for_test(p, -1);
    ASSERT_EQ(0,
              std::memcmp(results[0].data(), results[1].data(), results[0].size() * sizeof(float)))
        << "the two kinds of slot writes gave different bits";
  });
}

// The contract of every transport (../common/p2p_contract.h), with default and with 4 KiB rings.
std::string CreateName(hvds_test::CreateFn create) {
  return create == CreateSmallRings ? "small_rings" : "default";
}

INSTANTIATE_TEST_SUITE_P(Shm, P2pContract,
                         ::testing::Values(hvds__shm_p2p_create, CreateSmallRings),
                         [](const auto& info) { return CreateName(info.param); });
INSTANTIATE_TEST_SUITE_P(Shm, P2pOwnEngine,
                         ::testing::Values(hvds__shm_p2p_create, CreateSmallRings),
                         [](const auto& info) { return CreateName(info.param); });
INSTANTIATE_TEST_SUITE_P(Shm, P2pContractRanks,
                         ::testing::Combine(::testing::Values(hvds__shm_p2p_create,
                                                              CreateSmallRings),
                                            ::testing::Values(2, 3, 4, 5)),
                         [](const auto& info) {
                           return "np" + std::to_string(std::get<1>(info.param)) + "_" +
                                  CreateName(std::get<0>(info.param));
                         });

INSTANTIATE_TEST_SUITE_P(Ranks, ShmRanks,
                         ::testing::Combine(::testing::Values(2, 3, 4, 5),
                                            ::testing::Values(false, true)),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_small_rings" : "_default");
                         });

// The segment allreduce: every size class (empty, fewer elements than ranks, one round, many
// rounds through both halves of tiny slots), several dtypes and ops, back to back with
// transport traffic in between.
TEST_P(ShmRanks, SegmentAllreduce) {
  const int n = std::get<0>(GetParam());
  Run([&](int rank, hvds_p2p_t* p, Gate&) {
    for (size_t count : {size_t{0}, size_t{1}, size_t(n - 1), size_t{1000}, size_t{3} << 20}) {
      std::vector<float> f(count);
      for (size_t i = 0; i < count; i++) f[i] = In(rank, i);
      ASSERT_EQ(hvds__shm_allreduce(p, f.data(), count, HVDS_FLOAT32, HVDS_SUM), HVDS_SUCCESS)
          << p->error;
      float k = static_cast<float>(n * (n + 1) / 2);
      for (size_t i = 0; i < count; i++) ASSERT_EQ(f[i], k * (i % 13)) << i;
      std::vector<int64_t> m(count);
      for (size_t i = 0; i < count; i++) m[i] = static_cast<int64_t>((rank * 7919 + i) % 1000);
      ASSERT_EQ(hvds__shm_allreduce(p, m.data(), count, HVDS_INT64, HVDS_MAX), HVDS_SUCCESS)
          << p->error;
      for (size_t i = 0; i < count; i++) {
        int64_t want = 0;
        for (int r = 0; r < n; r++) want = std::max<int64_t>(want, (r * 7919 + i) % 1000);
        ASSERT_EQ(m[i], want) << i;
      }
      int token = rank, next = -1;  // the rings still work in between
      hvds_p2p_req_t* rr = Irecv(p, (rank + n - 1) % n, &next, sizeof next, 5);
      ASSERT_EQ(Wait(p, Isend(p, (rank + 1) % n, &token, sizeof token, 5)), HVDS_SUCCESS);
      ASSERT_EQ(Wait(p, rr), HVDS_SUCCESS) << p->error;
      EXPECT_EQ(next, (rank + n - 1) % n);
    }
    double d = rank + 0.5;
    ASSERT_EQ(hvds__shm_allreduce(p, &d, 1, HVDS_FLOAT64, HVDS_MIN), HVDS_SUCCESS) << p->error;
    EXPECT_EQ(d, 0.5);
    EXPECT_EQ(hvds__shm_allreduce(p, &d, 1, HVDS_FLOAT64, HVDS_ADASUM), HVDS_NOT_SUPPORTED);
  });
}

// The segment's name is gone from /dev/shm once every rank attached.
TEST(ShmP2p, NameUnlinkedOnceAttached) {
  RunRanks(3, [](int rank, hvds_p2p_t*, Gate& gate) {
    gate.Wait();
    if (rank == 0) {
      std::string self = "hvds-" + std::to_string(getpid()) + "-";
      int found = 0;
      if (DIR* d = opendir("/dev/shm")) {
        while (struct dirent* e = readdir(d))
          found += strncmp(e->d_name, self.c_str(), self.size()) == 0;
        closedir(d);
      }
      EXPECT_EQ(found, 0);
    }
    gate.Wait();
  });
}

// A rank that vanishes as a crashed process would (lock dropped, state left alive): a peer
// blocked on it and a peer blocked on that peer both fail within a second, naming it (the
// second one's failed_peer is the first one, as with a closed connection over TCP).
TEST(ShmP2p, CrashedPeerIsNamed) {
  RunRanks(
      3,
      [&](int rank, hvds_p2p_t* p, Gate& gate) {
        int x = 0;
        if (rank == 2) {
          gate.Wait();
          sleep_ms(100);
          hvds__shm_p2p_crash_for_test(p);
          return;
        }
        hvds_p2p_req_t* r = Irecv(p, rank == 0 ? 2 : 0, &x, 4, 1);
        gate.Wait();
        auto t0 = Clock::now();
        EXPECT_EQ(Wait(p, r, 30000), HVDS_REMOTE_ERROR);
        EXPECT_LT(MsSince(t0), 1500.0);
        // Rank 0 lost rank 2; rank 1 lost rank 0, whose message names rank 2.
        EXPECT_EQ(p->failed_peer, rank == 0 ? 2 : 0) << p->error;
        EXPECT_NE(strstr(p->error, "rank 2 (pid"), nullptr) << p->error;
        EXPECT_NE(strstr(p->error, "exited without closing"), nullptr) << p->error;
        p->ops->destroy(p);
      },
      30000, /*destroy=*/false);
}

// Rank 0's failure to create the segment reaches the others at once.
TEST(ShmP2p, CreateFailurePublished) {
  hvds_test::MemKv store;
  hvds_kv_t kv = store.kv();
  const char* msg = "!no room";
  ASSERT_EQ(kv.set(kv.ctx, "x/shm", msg, strlen(msg)), HVDS_SUCCESS);
  hvds_p2p_t* p = nullptr;
  char err[512] = "";
  EXPECT_EQ(hvds__shm_p2p_create(&kv, "x", 1, 2, nullptr, nullptr, 5000, &p, err, sizeof err),
            HVDS_REMOTE_ERROR);
  EXPECT_EQ(p, nullptr);
  EXPECT_NE(strstr(err, "rank 0 could not create the shared memory segment: no room"), nullptr)
      << err;
}

// A rank that cannot attach says so, and rank 0 stops waiting for it at once.
TEST(ShmP2p, AttachFailurePublished) {
  struct Wrap {
    hvds_kv_t inner;
    static hvds_result_t Set(void* c, const char* k, const void* v, size_t n) {
      auto* w = static_cast<Wrap*>(c);
      return w->inner.set(w->inner.ctx, k, v, n);
    }
    static hvds_result_t Get(void* c, const char* k, int ms, void** v, size_t* n) {
      auto* w = static_cast<Wrap*>(c);
      hvds_result_t rc = w->inner.get(w->inner.ctx, k, ms, v, n);
      if (rc == HVDS_SUCCESS && strcmp(k, "y/shm") == 0) {  // rank 1 is given a wrong name
        free(*v);
        *v = strdup("/hvds-no-such-segment");
        *n = strlen("/hvds-no-such-segment");
      }
      return rc;
    }
  };
  hvds_test::MemKv store;
  Wrap w{store.kv()};
  hvds_kv_t kv0 = store.kv(), kv1 = {&w, Wrap::Set, Wrap::Get};
  hvds_result_t rc0 = HVDS_SUCCESS;
  char err0[512] = "";
  auto t0 = Clock::now();
  std::thread r0([&] {
    hvds_p2p_t* p = nullptr;
    rc0 = hvds__shm_p2p_create(&kv0, "y", 0, 2, nullptr, nullptr, 20000, &p, err0, sizeof err0);
    EXPECT_EQ(p, nullptr);
  });
  hvds_p2p_t* p = nullptr;
  char err[512] = "";
  EXPECT_EQ(hvds__shm_p2p_create(&kv1, "y", 1, 2, nullptr, nullptr, 20000, &p, err, sizeof err),
            HVDS_SYSTEM_ERROR);
  r0.join();
  EXPECT_EQ(rc0, HVDS_REMOTE_ERROR);
  EXPECT_NE(strstr(err0, "rank 1 could not attach: shm_open(/hvds-no-such-segment)"), nullptr)
      << err0;
  EXPECT_LT(MsSince(t0), 5000.0);
}

// Without rank 0, the others time out.
TEST(ShmP2p, CreateTimesOut) {
  hvds_test::MemKv store;
  hvds_kv_t kv = store.kv();
  hvds_p2p_t* p = nullptr;
  char err[512] = "";
  auto t0 = Clock::now();
  EXPECT_NE(hvds__shm_p2p_create(&kv, "lonely", 1, 2, nullptr, nullptr, 300, &p, err, sizeof err),
            HVDS_SUCCESS);
  EXPECT_EQ(p, nullptr);
  EXPECT_NE(err[0], '\0');
  EXPECT_LT(MsSince(t0), 5000.0);
}

// A peer's death (a crashed process) ends a doorbell wait with an error naming it.
TEST(ShmP2p, DoorbellWaitEndsOnPeerDeath) {
  RunRanks(
      2,
      [](int rank, hvds_p2p_t* p, Gate& gate) {
        if (rank == 0) {
          gate.Wait();
          EXPECT_EQ(p->ops->bell_wait(p, 1), HVDS_REMOTE_ERROR);
          EXPECT_EQ(p->failed_peer, 1) << p->error;
          p->ops->destroy(p);
        } else {
          gate.Wait();
          sleep_ms(100);
          hvds__shm_p2p_crash_for_test(p);
        }
      },
      30000, /*destroy=*/false);
}

// Ring sizes: 1 MiB for few ranks, smaller for many, never below 64 KiB.
TEST(ShmP2p, RingDefaults) {
  EXPECT_EQ(hvds__shm_ring_default(2), size_t{1} << 20);
  EXPECT_EQ(hvds__shm_ring_default(8), size_t{1} << 20);
  EXPECT_LE(hvds__shm_ring_default(32) * 32 * 31, size_t{256} << 20);
  EXPECT_EQ(hvds__shm_ring_default(1000), size_t{64} << 10);
}

}  // namespace
