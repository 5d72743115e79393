// The dense model: hand-computed costs of each algorithm, the exchange pipeline, the runtime's
// choice (hvds__allreduce_choice and the knobs it reads), and monotonicity.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "param.h"
#include "sim.h"

namespace {

const double kA = 10e-6;   // alpha
const double kB = 1e-9;    // beta: 1 GB/s
const double kG = 0.5e-9;  // gamma

hvds_sim_net_t net(double a = kA, double b = kB, double g = kG) { return {a, b, g, 0, 1, 0}; }

hvds_sim_cfg_t defaults() {
  hvds_sim_cfg_t c;
  hvds_sim_cfg_runtime(&c);
  return c;
}

const size_t kBig = size_t(1) << 30;  // a segment larger than any vector: one segment per step

}  // namespace

TEST(SimExchange, OneSegment) {
  auto n = net();
  EXPECT_DOUBLE_EQ(hvds_sim_exchange(&n, 0, 0, kBig, 1), 0);  // nothing moves, no message
  EXPECT_DOUBLE_EQ(hvds_sim_exchange(&n, 4096, 4096, kBig, 0), kA + 4096 * kB);
  EXPECT_DOUBLE_EQ(hvds_sim_exchange(&n, 4096, 4096, kBig, 1), kA + 4096 * kB + 4096 * kG);
  // Unequal directions: the link carries the larger; only the received part is reduced.
  EXPECT_DOUBLE_EQ(hvds_sim_exchange(&n, 8192, 1024, kBig, 1), kA + 8192 * kB + 1024 * kG);
}

TEST(SimExchange, PipelineHidesTheFasterStage) {
  // Four segments of 1 MB, latency 10 us (below a segment's 1 ms transfer). Transfer-bound: the
  // last segment's reduction sticks out.
  auto n = net(kA, 1e-9, 0.25e-9);
  EXPECT_NEAR(hvds_sim_exchange(&n, 4000000, 4000000, 1000000, 1),
              kA + 4 * 1e-3 + 1000000 * 0.25e-9, 1e-12);
  // Reduction-bound: the first transfer sticks out, then one reduction per segment.
  n = net(kA, 0.25e-9, 1e-9);
  EXPECT_NEAR(hvds_sim_exchange(&n, 4000000, 4000000, 1000000, 1),
              kA + 1000000 * 0.25e-9 + 4 * 1e-3, 1e-12);
  // A short last segment (4500 B = 4 x 1000 + 500).
  n = net(0, 1e-9, 0);
  EXPECT_NEAR(hvds_sim_exchange(&n, 4500, 0, 1000, 0), 4500e-9, 1e-15);
}

TEST(SimExchange, TwoSegmentsInFlightStallOnLatency) {
  // Latency 10 us against 1 us transfers (1000 B at 1 GB/s), no reduction: segments 0 and 1 go
  // at once and arrive at 11 and 12 us; 2 and 3 are posted then, and arrive at 22 and 23 us.
  auto n = net(10e-6, 1e-9, 0);
  EXPECT_NEAR(hvds_sim_exchange(&n, 4000, 4000, 1000, 0), 23e-6, 1e-15);
  // One segment, or latency below a segment's transfer: alpha once.
  EXPECT_NEAR(hvds_sim_exchange(&n, 4000, 4000, 4000, 0), 14e-6, 1e-15);
}

TEST(SimRing, HandComputedAtFourRanks) {
  // 4096 floats on 4 ranks: blocks of 1024 floats = 4096 B; 3 reduce steps, 3 copy steps.
  auto n = net();
  double rs = 3 * (kA + 4096 * kB + 4096 * kG), ag = 3 * (kA + 4096 * kB);
  EXPECT_NEAR(hvds_sim_reducescatter(&n, 4, 4096, 4, kBig), rs, 1e-15);
  EXPECT_NEAR(hvds_sim_allgather(&n, 4, 16384, kBig), ag, 1e-15);
  EXPECT_NEAR(hvds_sim_ring_allreduce(&n, 4, 4096, 4, kBig), rs + ag, 1e-15);
  EXPECT_EQ(hvds_sim_ring_steps(4, 4096), 6);
  // Uneven split (4097 floats): the busiest rank moves the 1025-float block.
  EXPECT_NEAR(hvds_sim_ring_allreduce(&n, 4, 4097, 4, kBig),
              3 * (kA + 4100 * kB + 4100 * kG) + 3 * (kA + 4100 * kB), 1e-15);
}

TEST(SimRing, MatchesTheTextbookFormula) {
  // 2(P-1) alpha + 2(P-1)/P n beta + (P-1)/P n gamma when P divides the vector, with one segment
  // per step (each step waits for the previous one's arrival). With segments longer to transfer
  // than alpha and gamma 0 the stream runs back to back across steps: one alpha per phase.
  for (int P : {2, 3, 4, 8, 16, 100, 1024}) {
    size_t count = size_t(P) * 3000, bytes = count * 4;
    auto n = net();
    double want = 2.0 * (P - 1) * kA + 2.0 * (P - 1) / P * bytes * kB + (P - 1.0) / P * bytes * kG;
    EXPECT_NEAR(hvds_sim_ring_allreduce(&n, P, count, 4, kBig), want, want * 1e-12) << P;
    n.gamma = 0;
    n.alpha = 0.5e-6;  // a 1000-byte segment takes 1 us
    want = 2.0 * n.alpha + 2.0 * (P - 1) / P * bytes * kB;
    EXPECT_NEAR(hvds_sim_ring_allreduce(&n, P, count, 4, 1000), want, want * 1e-12) << P;
  }
}

TEST(SimRhd, HandComputedPowerOfTwo) {
  // 4096 floats on 4 ranks: halving 8192 B then 4096 B (reduced), doubling 4096 B then 8192 B.
  auto n = net();
  double want = 4 * kA + 2 * (8192 + 4096) * kB + (8192 + 4096) * kG;
  EXPECT_NEAR(hvds_sim_rhd_allreduce(&n, 4, 4096, 4, kBig), want, 1e-15);
  EXPECT_EQ(hvds_sim_rhd_steps(4, 4096), 4);
  // Rabenseifner's formula: 2 log2 P alpha + 2 (P-1)/P n beta + (P-1)/P n gamma.
  size_t count = 1 << 20, bytes = count * 4;
  want = 2 * 4 * kA + 2.0 * 15 / 16 * bytes * kB + 15.0 / 16 * bytes * kG;
  EXPECT_NEAR(hvds_sim_rhd_allreduce(&n, 16, count, 4, kBig), want, want * 1e-12);
}

TEST(SimRhd, FoldForNonPowersOfTwo) {
  // P = 5: rank 0 folds its 16 KiB into rank 1 (reduced), the 4 remaining ranks run P = 4, and
  // rank 1 sends the result back.
  auto n = net();
  double core = hvds_sim_rhd_allreduce(&n, 4, 4096, 4, kBig);
  double fold = kA + 16384 * kB + 16384 * kG, unfold = kA + 16384 * kB;
  EXPECT_NEAR(hvds_sim_rhd_allreduce(&n, 5, 4096, 4, kBig), fold + core + unfold, 1e-15);
  EXPECT_EQ(hvds_sim_rhd_steps(5, 4096), 6);
  EXPECT_EQ(hvds_sim_rhd_steps(7, 4096), 6);
}

TEST(SimRhd, TinyVectorsSwapWhole) {
  // count < P2: log2 P2 swaps of the whole vector, each reduced.
  auto n = net();
  EXPECT_NEAR(hvds_sim_rhd_allreduce(&n, 8, 3, 4, kBig), 3 * (kA + 12 * kB + 12 * kG), 1e-15);
  EXPECT_EQ(hvds_sim_rhd_steps(8, 3), 3);
  EXPECT_EQ(hvds_sim_rhd_steps(8, 8), 6);
  EXPECT_DOUBLE_EQ(hvds_sim_rhd_allreduce(&n, 8, 0, 4, kBig), 0);
  EXPECT_DOUBLE_EQ(hvds_sim_rhd_allreduce(&n, 1, 100, 4, kBig), 0);
}

TEST(SimBroadcast, BinomialTreeWithFanOut) {
  auto n = net();
  const double B = 1 << 20;
  // P = 2: one hop.
  EXPECT_NEAR(hvds_sim_broadcast(&n, 2, 1 << 20, kBig), kA + B * kB, 1e-15);
  // P = 8, one segment: the root feeds 3 children at once (3 B), rank 4 two (2 B), rank 6 one.
  EXPECT_NEAR(hvds_sim_broadcast(&n, 8, 1 << 20, kBig), 3 * kA + 6 * B * kB, 1e-15);
  // P = 8, 8 segments: the root's 3 B, then the last segment crosses 2 + 1 fan-outs.
  EXPECT_NEAR(hvds_sim_broadcast(&n, 8, 1 << 20, 1 << 17), 3 * kA + (3 * B + 3 * B / 8) * kB,
              1e-15);
}

TEST(SimChoice, SameAsTheRuntimeRuleOverAGrid) {
  hvds_sim_cfg_t c = defaults();
  const size_t sizes[] = {0,
                          1,
                          4,
                          1024,
                          256 << 10,
                          (256 << 10) + 4,
                          1 << 20,
                          16 << 20,
                          (16 << 20) + 4,
                          64 << 20,
                          size_t(1) << 30};
  for (int P : {1, 2, 3, 4, 5, 7, 8, 16, 64, 1000, 1024}) {
    for (size_t b : sizes) {
      // execute.c's options, built independently here: AUTO, rhd_max_bytes, a segment.
      size_t rhd = c.rhd_max_bytes ? c.rhd_max_bytes : hvds__coll_rhd_max_for_link(c.link_beta);
      hvds_coll_opts_t o = {7, HVDS_ALGO_AUTO, 1 << 20, rhd};
      hvds_p2p_t p;
      memset(&p, 0, sizeof p);
      p.size = P;
      const char* want = hvds__allreduce_choice(&p, b, &o);
      EXPECT_STREQ(hvds_sim_allreduce_choice(&c, P, b), want) << P << " " << b;
      // The algorithm priced is the one chosen.
      auto n = net();
      const char* algo = nullptr;
      hvds_coll_opts_t so = hvds_sim_runtime_opts(&c, b, P);
      double t = hvds_sim_allreduce(&n, P, b / 4, 4, &so, &algo);
      EXPECT_STREQ(algo, want);
      size_t seg = hvds__coll_segment(&so, 4);
      double direct = strcmp(want, "rhd") == 0 ? hvds_sim_rhd_allreduce(&n, P, b / 4, 4, seg)
                                               : hvds_sim_ring_allreduce(&n, P, b / 4, 4, seg);
      EXPECT_DOUBLE_EQ(t, direct);
    }
  }
}

TEST(SimChoice, DefaultsAndKnobsAreTheRuntimes) {
  hvds_sim_cfg_t c = defaults();
  EXPECT_EQ(c.rhd_max_bytes, 0u);  // params.def: unset, chosen from the link
  EXPECT_STREQ(hvds_sim_allreduce_choice(&c, 4, 1 << 20), "rhd");  // link unknown: 1 MiB
  EXPECT_STREQ(hvds_sim_allreduce_choice(&c, 4, (1 << 20) + 4), "ring");
  c.link_beta = 8.0 / 1e9;  // 1 Gbit/s: the wire is the limit, the ring from 64 KiB
  EXPECT_STREQ(hvds_sim_allreduce_choice(&c, 8, 64 << 10), "rhd");
  EXPECT_STREQ(hvds_sim_allreduce_choice(&c, 8, (64 << 10) + 4), "ring");
  c.link_beta = 8.0 / 10e9;  // 10 Gbit/s: up to 1 MiB
  EXPECT_STREQ(hvds_sim_allreduce_choice(&c, 8, 1 << 20), "rhd");
  c.link_beta = 0;
  setenv("HVDSPARSE_RHD_MAX_BYTES", "1024", 1);
  setenv("HVDSPARSE_ALLREDUCE_ALGORITHM", "", 1);
  hvds__param_reload();
  hvds_sim_cfg_runtime(&c);
  EXPECT_EQ(c.rhd_max_bytes, 1024u);
  EXPECT_STREQ(hvds_sim_allreduce_choice(&c, 4, 2048), "ring");
  setenv("HVDSPARSE_ALLREDUCE_ALGORITHM", "rhd", 1);
  hvds__param_reload();
  hvds_sim_cfg_runtime(&c);
  EXPECT_STREQ(hvds_sim_allreduce_choice(&c, 4, size_t(1) << 30), "rhd");
  unsetenv("HVDSPARSE_RHD_MAX_BYTES");
  unsetenv("HVDSPARSE_ALLREDUCE_ALGORITHM");
  hvds__param_reload();
}

TEST(SimChoice, RingSegmentFollowsExecute) {
  hvds_sim_cfg_t c = defaults();
  // A quarter of a block, clamped to 256 KiB..1 MiB (link unknown), or to what the link moves
  // in 2 ms (256 KiB at 1 Gbit/s).
  EXPECT_EQ(hvds_sim_runtime_opts(&c, 1 << 20, 4).chunk_bytes, size_t(256) << 10);
  EXPECT_EQ(hvds_sim_runtime_opts(&c, 8 << 20, 4).chunk_bytes, size_t(512) << 10);
  EXPECT_EQ(hvds_sim_runtime_opts(&c, 64 << 20, 8).chunk_bytes, size_t(1) << 20);
  EXPECT_EQ(hvds_sim_runtime_opts(&c, size_t(1) << 30, 2).chunk_bytes, size_t(1) << 20);
  c.link_beta = 8e-9;  // 1 Gbit/s
  EXPECT_EQ(hvds_sim_runtime_opts(&c, 64 << 20, 4).chunk_bytes, size_t(256) << 10);
  c.link_beta = 8e-9 / 3;  // 3 Gbit/s: 750 KB in 2 ms, rounded down to 64 KiB
  EXPECT_EQ(hvds_sim_runtime_opts(&c, 64 << 20, 4).chunk_bytes, size_t(704) << 10);
  c.link_beta = 8e-10;  // 10 Gbit/s
  EXPECT_EQ(hvds_sim_runtime_opts(&c, 64 << 20, 4).chunk_bytes, size_t(1) << 20);
  c.link_beta = 0;
  c.ring_chunk_bytes = 12345;
  EXPECT_EQ(hvds_sim_runtime_opts(&c, 1 << 20, 4).chunk_bytes, 12345u);
}

TEST(SimMonotone, InBytesAndInEveryParameter) {
  const int ranks[] = {2, 3, 4, 8, 13, 64, 1024};
  for (int P : ranks) {
    double prev[3] = {0, 0, 0};
    for (size_t count = 1; count <= (size_t(1) << 26); count = count * 3 + 1) {
      auto n = net();
      double t[3] = {hvds_sim_ring_allreduce(&n, P, count, 4, 1 << 20),
                     hvds_sim_rhd_allreduce(&n, P, count, 4, 1 << 20),
                     hvds_sim_broadcast(&n, P, count * 4, 1 << 20)};
      for (int k = 0; k < 3; k++) {
        EXPECT_GE(t[k], prev[k]) << "algorithm " << k << " P " << P << " count " << count;
        prev[k] = t[k];
      }
      // Each of alpha, beta, gamma doubled: never faster.
      for (int which = 0; which < 3; which++) {
        auto m =
            net(kA * (which == 0 ? 2 : 1), kB * (which == 1 ? 2 : 1), kG * (which == 2 ? 2 : 1));
        EXPECT_GE(hvds_sim_ring_allreduce(&m, P, count, 4, 1 << 20), t[0]);
        EXPECT_GE(hvds_sim_rhd_allreduce(&m, P, count, 4, 1 << 20), t[1]);
      }
    }
  }
}

TEST(SimMonotone, RingGrowsWithRanks) {
  // The ring's latency and bandwidth terms both grow with P. (Halving-doubling does not: a
  // vector shorter than the power of two below P switches to whole-vector swaps, fewer steps.
  // Nor, by a fraction of a percent, does a segmented ring: a block that is not a multiple of the
  // segment ends in a short segment whose reduction sticks out less. Hence one segment here.)
  auto n = net();
  for (size_t count : {size_t(1000), size_t(1) << 20, size_t(1) << 26}) {
    double prev = 0;
    for (int P = 2; P <= 1024; P++) {
      double t = hvds_sim_ring_allreduce(&n, P, count, 4, kBig);
      EXPECT_GE(t, prev) << P;
      prev = t;
    }
  }
}

TEST(SimRuntime, AddsOverheadAndNegotiation) {
  hvds_sim_cfg_t c = defaults();
  auto n = net();
  n.overhead = 50e-6;
  // The negotiation: an int64 AND over 1 + 1024/64 = 17 words, halving-doubling at P = 4.
  hvds_coll_opts_t o = {0, HVDS_ALGO_AUTO, 0, 0};
  double neg = hvds_sim_rhd_allreduce(&n, 4, 17, 8, hvds__coll_segment(&o, 8));
  EXPECT_DOUBLE_EQ(hvds_sim_negotiation(&n, &c, 4), neg);
  const char* algo = nullptr;
  double t = hvds_sim_runtime_coll(&n, &c, HVDS_SIM_ALLREDUCE, 4, 1 << 20, 4, &algo);
  hvds_coll_opts_t ro = hvds_sim_runtime_opts(&c, 1 << 20, 4);
  EXPECT_DOUBLE_EQ(t, 50e-6 + neg + hvds_sim_allreduce(&n, 4, 1 << 18, 4, &ro, nullptr));
  EXPECT_STREQ(algo, "rhd");
  t = hvds_sim_runtime_coll(&n, &c, HVDS_SIM_ALLGATHER, 4, 1 << 20, 4, &algo);
  EXPECT_DOUBLE_EQ(t, 50e-6 + neg + hvds_sim_allgather(&n, 4, 1 << 20, 1 << 20));
  EXPECT_EQ(hvds_sim_coll_parse("broadcast"), HVDS_SIM_BROADCAST);
  EXPECT_EQ(hvds_sim_coll_parse("nope"), -1);
}
