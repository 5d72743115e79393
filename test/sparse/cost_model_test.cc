// The cost model: union estimates, the selector's qualitative regions (dense when dense, sparse
// when very sparse, the SparCML model table's picks), and determinism.
#include "cost_model.h"

#include <gtest/gtest.h>

#include <cstring>

#include "sparse_input.h"

namespace {

hvds_sparse_problem_t problem(int P, double N, double density, double overlap = -1) {
  return {P, N, 1, 4, 4, density * N, overlap, 0, 0, 0, 0, 0, 0};
}

bool is_sparse(hvds_sparse_algo_t a) { return a != HVDS_SPARSE_DENSE && a != HVDS_SPARSE_DSAR; }

}  // namespace

TEST(SparseCostModel, UnionEstimates) {
  auto x = problem(8, 1000, 0.01, 1.0);
  EXPECT_DOUBLE_EQ(hvds__sparse_union(&x, 8), 10);  // identical supports
  x.overlap = 0;
  EXPECT_DOUBLE_EQ(hvds__sparse_union(&x, 8), 80);      // disjoint
  EXPECT_DOUBLE_EQ(hvds__sparse_union(&x, 200), 1000);  // capped at N
  x.overlap = 0.5;
  EXPECT_DOUBLE_EQ(hvds__sparse_union(&x, 2), 15);  // 2k - |A n B|
  x.overlap = -1;                                   // uniform: N (1 - (1 - d)^m)
  EXPECT_NEAR(hvds__sparse_union(&x, 2), 1000 * (1 - 0.99 * 0.99), 1e-9);
  EXPECT_NEAR(hvds__sparse_union(&x, 1), 10, 1e-9);
}

// The overlap learned from a step inverts the shared-pool union: fed back, the model's union of
// all P supports is the measured one; identical supports give 1, disjoint ones 0.
TEST(SparseCostModel, OverlapEstimateInvertsTheUnion) {
  EXPECT_DOUBLE_EQ(hvds__sparse_overlap_estimate(4, 100, 100), 1.0);  // identical
  EXPECT_DOUBLE_EQ(hvds__sparse_overlap_estimate(4, 100, 400), 0.0);  // disjoint
  EXPECT_DOUBLE_EQ(hvds__sparse_overlap_estimate(4, 100, 250), 0.5);
  EXPECT_DOUBLE_EQ(hvds__sparse_overlap_estimate(2, 10, 15), 0.5);  // 2k - |A n B|
  // A rank without entries (joined): three identical supports are still overlap 1.
  EXPECT_DOUBLE_EQ(hvds__sparse_overlap_estimate(4, 100, 100), 1.0);
  // Clamped: more than P k (cannot happen with k the largest count), less than k (rows that
  // summed to zero in a dense result).
  EXPECT_DOUBLE_EQ(hvds__sparse_overlap_estimate(4, 100, 500), 0.0);
  EXPECT_DOUBLE_EQ(hvds__sparse_overlap_estimate(4, 100, 60), 1.0);
  // No estimate: one rank, no entries.
  EXPECT_LT(hvds__sparse_overlap_estimate(1, 100, 100), 0);
  EXPECT_LT(hvds__sparse_overlap_estimate(4, 0, 0), 0);
  for (int P : {2, 3, 4, 7, 64}) {
    for (double w : {0.0, 0.1, 0.25, 0.5, 0.9, 1.0}) {
      auto x = problem(P, 1 << 24, 1e-3, w);
      double u = hvds__sparse_union(&x, P);
      double back = hvds__sparse_overlap_estimate(P, x.nnz, u);
      EXPECT_NEAR(back, w, 1e-12) << "P " << P << " w " << w;
      x.overlap = back;
      EXPECT_NEAR(hvds__sparse_union(&x, P), u, 1e-6 * u);
    }
  }
}

// (Dense needs a bandwidth-bound size: for a few tens of KB, P - 1 whole-vector messages of the
// allgather baseline beat the dense allreduce's 2 log P or 2 (P - 1) latencies, as they would on a
// real link. P = 2 is left out of the dense half: there one swap of the dense vectors, which is
// what the allgather baseline does with dense streams, is one message cheaper than
// halving-doubling. With no network given, local work is free, and ZEN with packed indices
// moves fewer bytes than dense up to about 70%: per element of the tensor, its push sends 0.6 x
// 5 bytes at 60% (one-byte gaps and the value) and its pull about 4 (the union's values and a
// bitmap bit), against the dense allreduce's 8 (both times (P - 1) / P). High density is 80% and
// more here.)
TEST(SparseCostModel, DenseAtHighDensitySparseAtVeryLowDensity) {
  for (int P : {2, 3, 4, 7, 8, 16, 64}) {
    for (double N : {1e4, 1e6, 1e8}) {
      auto lo = problem(P, N, 1e-5);
      EXPECT_TRUE(is_sparse(hvds__sparse_select(&lo, nullptr, nullptr))) << "P " << P << " N " << N;
      if (P == 2 || N < 1e6) continue;
      for (double d : {0.8, 0.9, 1.0}) {
        auto hi = problem(P, N, d);
        EXPECT_EQ(hvds__sparse_select(&hi, nullptr, nullptr), HVDS_SPARSE_DENSE)
            << "P " << P << " N " << N << " d " << d;
      }
    }
  }
}

// The digest's model table (N = 2^24, f32/u32, Aries-like: 1.5 us, 9.5 GB/s): recursive doubling
// for small P and low density; not recursive doubling once the union fills in at P = 64.
TEST(SparseCostModel, SparcmlRegions) {
  hvds_sparse_net_t aries = {1.5e-6, 1 / 9.5e9, 0, 0, 0, 0, 0};
  const double N = 1 << 24;
  auto x = problem(8, N, 1e-3);
  x.pack_indices = -1;  // SparCML's algorithms send full-width indices
  EXPECT_EQ(hvds__sparse_select(&x, &aries, nullptr), HVDS_SPARSE_SSAR_RD);
  x = problem(64, N, 5e-2);
  hvds_sparse_algo_t a = hvds__sparse_select(&x, &aries, nullptr);
  EXPECT_NE(a, HVDS_SPARSE_SSAR_RD);
  EXPECT_NE(a, HVDS_SPARSE_ALLGATHER);
  // Recursive doubling after fill-in costs more than the dense allreduce (the digest's warning).
  EXPECT_GT(hvds__sparse_cost(HVDS_SPARSE_SSAR_RD, &x, &aries),
            hvds__sparse_cost(HVDS_SPARSE_DENSE, &x, &aries));
}

// More overlap makes partitioned schemes (ZEN, split-allgather) relatively cheaper than the
// allgather baseline, whose cost ignores overlap.
TEST(SparseCostModel, OverlapHelpsPartitionedSchemes) {
  auto lo = problem(32, 1 << 24, 1e-2, 0.0), hi = problem(32, 1 << 24, 1e-2, 0.9);
  EXPECT_DOUBLE_EQ(hvds__sparse_cost(HVDS_SPARSE_ALLGATHER, &lo, nullptr),
                   hvds__sparse_cost(HVDS_SPARSE_ALLGATHER, &hi, nullptr));
  EXPECT_LT(hvds__sparse_cost(HVDS_SPARSE_ZEN, &hi, nullptr),
            hvds__sparse_cost(HVDS_SPARSE_ZEN, &lo, nullptr));
  EXPECT_LT(hvds__sparse_cost(HVDS_SPARSE_ZEN, &hi, nullptr),
            hvds__sparse_cost(HVDS_SPARSE_ALLGATHER, &hi, nullptr));
}

TEST(SparseCostModel, DeterministicAndReportsEveryCost) {
  for (double d : {1e-6, 1e-4, 1e-2, 0.1, 0.3, 0.9}) {
    for (int P : {1, 2, 5, 8, 100}) {
      auto x = problem(P, 123457, d, d > 0.05 ? 0.3 : -1);
      double c1[HVDS_SPARSE_ALGO_COUNT], c2[HVDS_SPARSE_ALGO_COUNT];
      hvds_sparse_algo_t a1 = hvds__sparse_select(&x, nullptr, c1);
      hvds_sparse_algo_t a2 = hvds__sparse_select(&x, nullptr, c2);
      EXPECT_EQ(a1, a2);
      EXPECT_EQ(memcmp(c1, c2, sizeof c1), 0);
      for (int a = HVDS_SPARSE_DENSE; a < HVDS_SPARSE_ALGO_COUNT; a++) {
        EXPECT_GE(c1[a], 0);
        if (P > 1) {
          EXPECT_LE(c1[a1], c1[a]);
        }
      }
      if (P == 1) {
        EXPECT_EQ(a1, HVDS_SPARSE_SSAR_RD);
      }
    }
  }
  auto x = problem(4, 1000, 0.01);
  EXPECT_GT(hvds__sparse_cost(HVDS_SPARSE_AUTO, &x, nullptr), 1e300);
}

// Local work: zero speeds leave the network model as it was; priced work only adds, grows with
// the entries, and a costly keyed hash turns the selector away from ZEN, the one algorithm that
// hashes, where the bytes alone pick it (P = 4, N = 2^24, 10%: ZEN's bitmap pull is the
// byte-cheapest, as on the 1 Gbit/s cluster where it ran 1.7-2.5x slower than the best).
TEST(SparseCostModel, LocalWorkAddsToTheNetworkAndCanOverrideIt) {
  hvds_sparse_net_t bytes_only = {10e-6, 1.0 / 125e6, 0, 0, 0, 0, 0};
  hvds_sparse_net_t with_work = {10e-6, 1.0 / 125e6, 1.5e-9, 25e-9, 0, 0, 0};
  auto x = problem(4, 1 << 24, 0.1);
  x.pack_indices = -1;  // priced by bytes alone, packing would win everywhere
  for (int a = HVDS_SPARSE_DENSE; a < HVDS_SPARSE_ALGO_COUNT; a++) {
    auto id = (hvds_sparse_algo_t)a;
    double net = hvds__sparse_cost(id, &x, &bytes_only),
           all = hvds__sparse_cost(id, &x, &with_work);
    EXPECT_GT(all, net) << a;
    auto bigger = problem(4, 1 << 24, 0.2);
    bigger.pack_indices = -1;
    EXPECT_GT(
        hvds__sparse_cost(id, &bigger, &with_work) - hvds__sparse_cost(id, &bigger, &bytes_only),
        all - net)
        << a;
  }
  EXPECT_EQ(hvds__sparse_select(&x, &bytes_only, nullptr), HVDS_SPARSE_ZEN);
  EXPECT_NE(hvds__sparse_select(&x, &with_work, nullptr), HVDS_SPARSE_ZEN);
}

// Normalizing the inputs costs every algorithm the same steps: each prediction grows by
// input x gamma, so the pick stays; without a measured gamma the term is left out.
TEST(SparseCostModel, InputStepsAddToEveryAlgorithmAlike) {
  hvds_sparse_net_t with_work = {10e-6, 1.0 / 125e6, 2e-9, 10e-9, 0, 0, 0};
  hvds_sparse_net_t bytes_only = {10e-6, 1.0 / 125e6, 0, 0, 0, 0, 0};
  auto x = problem(4, 1 << 24, 0.01, 0.3);
  auto y = x;
  y.input = hvds__sparse_input_steps(x.nnz, x.dim - 1, 4, 0);
  EXPECT_GT(y.input, hvds__sparse_input_steps(x.nnz, x.dim - 1, 4, 1));
  for (int a = HVDS_SPARSE_DENSE; a < HVDS_SPARSE_ALGO_COUNT; a++) {
    auto id = (hvds_sparse_algo_t)a;
    EXPECT_NEAR(hvds__sparse_cost(id, &y, &with_work) - hvds__sparse_cost(id, &x, &with_work),
                y.input * 2e-9, 1e-12)
        << a;
    EXPECT_EQ(hvds__sparse_cost(id, &y, &bytes_only), hvds__sparse_cost(id, &x, &bytes_only)) << a;
  }
  EXPECT_EQ(hvds__sparse_select(&y, &with_work, nullptr),
            hvds__sparse_select(&x, &with_work, nullptr));
}

// An unsorted input the dense allreduce adds in as it comes (sparse_input.h) costs it its own
// steps instead of the sort's; the sparse algorithms still pay the sort. At a high density that
// is the difference between dense and DSAR.
TEST(SparseCostModel, TheDenseAllreduceSkipsTheSortOfADeferredInput) {
  hvds_sparse_net_t net = {10e-6, 1.0 / 1.25e9, 8e-9, 10e-9, 0, 0, 0};
  auto x = problem(8, 1 << 20, 0.4, -1);
  x.input = hvds__sparse_input_steps(x.nnz, x.dim - 1, 4, 0);
  auto y = x;
  y.input_dense = hvds__sparse_input_steps(x.nnz, 0, 4, 1) + x.nnz + x.dim / 64;
  ASSERT_LT(y.input_dense, y.input);
  for (int a = HVDS_SPARSE_DENSE; a < HVDS_SPARSE_ALGO_COUNT; a++) {
    auto id = (hvds_sparse_algo_t)a;
    double saved = hvds__sparse_cost(id, &x, &net) - hvds__sparse_cost(id, &y, &net);
    EXPECT_NEAR(saved, a == HVDS_SPARSE_DENSE ? (y.input - y.input_dense) * 8e-9 : 0, 1e-12) << a;
  }
  EXPECT_NE(hvds__sparse_select(&x, &net, nullptr), HVDS_SPARSE_DENSE);
  EXPECT_EQ(hvds__sparse_select(&y, &net, nullptr), HVDS_SPARSE_DENSE);
}

// Skewed indices (all of a rank's entries in one index range) cost the range-partitioned
// algorithms more, and them only: ZEN hashes its ranges, recursive doubling and allgather do not
// partition. With Zipf-like skew the pick moves off split-allgather.
TEST(SparseCostModel, RangeImbalanceCostsSplitAlgorithmsOnly) {
  hvds_sparse_net_t net = {10e-6, 1.0 / 125e6, 2e-9, 10e-9, 0, 0, 0};
  auto even = problem(4, 1 << 24, 0.01, 0.5);
  even.pack_indices = -1;  // packed, recursive doubling would win either way
  auto skew = even;
  skew.imbalance = 3.5;
  for (int a = HVDS_SPARSE_DENSE; a < HVDS_SPARSE_ALGO_COUNT; a++) {
    auto id = (hvds_sparse_algo_t)a;
    double c0 = hvds__sparse_cost(id, &even, &net), c1 = hvds__sparse_cost(id, &skew, &net);
    if (id == HVDS_SPARSE_SSAR_SAG)
      EXPECT_GT(c1, c0 * 1.2);
    else if (id == HVDS_SPARSE_DSAR)  // its dense all-gather, the larger part, is even
      EXPECT_GT(c1, c0);
    else
      EXPECT_EQ(c1, c0) << a;
  }
  auto over = even;
  over.imbalance = 100;  // clamped to P
  auto all_in_one = even;
  all_in_one.imbalance = 4;
  EXPECT_EQ(hvds__sparse_cost(HVDS_SPARSE_SSAR_SAG, &over, &net),
            hvds__sparse_cost(HVDS_SPARSE_SSAR_SAG, &all_in_one, &net));
  EXPECT_EQ(hvds__sparse_select(&even, &net, nullptr), HVDS_SPARSE_SSAR_SAG);
  EXPECT_NE(hvds__sparse_select(&skew, &net, nullptr), HVDS_SPARSE_SSAR_SAG);
}

// A dense tensor under sparse_detect: the dense allreduce runs on it as it is, every sparse
// algorithm first extracts its non-zero rows (a pass over N rows, k rows copied out and scanned
// in). Fully dense, the dense allreduce wins however slow the local work (DSAR, which adds the
// same ranges, was priced level with it and picked on a sanitizer build).
TEST(SparseCostModel, DenseInputCostsTheSparseAlgorithmsTheExtraction) {
  for (double gamma : {1e-9, 50e-9}) {
    hvds_sparse_net_t net = {20e-6, 1.0 / 1.25e9, gamma, 10e-9, 0, 0, 0};
    auto x = problem(4, 1 << 20, 1.0);
    auto detect = x;
    detect.dense_input = 1;
    double k = x.nnz, rows = (1 << 20) * 4 / 16.0;  // entries; dense steps of N float32 rows
    for (int a = HVDS_SPARSE_DENSE; a < HVDS_SPARSE_ALGO_COUNT; a++) {
      auto id = (hvds_sparse_algo_t)a;
      double more = hvds__sparse_cost(id, &detect, &net) - hvds__sparse_cost(id, &x, &net);
      double want = id == HVDS_SPARSE_DENSE ? -1.25 * k : rows + 2 * 1.25 * k;
      EXPECT_NEAR(more, want * gamma, 1e-6 * hvds__sparse_cost(id, &x, &net)) << a;
    }
    EXPECT_EQ(hvds__sparse_select(&detect, &net, nullptr), HVDS_SPARSE_DENSE) << gamma;
  }
}

// A merge tree's later levels merge unions: with identical supports each level holds half the
// entries of the one below, with disjoint ones all of them (allgather's P streams at P = 8: 8k,
// 4k and 2k entries merged against 8k three times), as recursive doubling's rounds are priced.
TEST(SparseCostModel, MergeTreesShrinkWithOverlap) {
  hvds_sparse_net_t work_only = {1e-15, 1e-15, 1e-9, 0, 0, 0, 0};
  auto local = [&](double overlap) {
    hvds_sparse_problem_t x = {8, 1 << 24, 1, 4, 4, 1 << 12, overlap, 0, 0, 1, -1, 0, 0};
    hvds_sparse_problem_t none = x;
    none.nnz = 0;  // what is not the merge tree: the result's copy and count of its union
    return hvds__sparse_cost(HVDS_SPARSE_ALLGATHER, &x, &work_only) -
           1e-9 * (1.25 + 0.25) * hvds__sparse_union(&x, 8) -
           hvds__sparse_cost(HVDS_SPARSE_ALLGATHER, &none, &work_only);
  };
  EXPECT_NEAR(local(1.0) / local(0.0), (8 + 4 + 2) / 24.0, 1e-3);
}

// DSAR's owner adds its range's P blocks into a dense accumulator, one pass each (no merge tree,
// unlike split-allgather): its local work grows with the entries received, not with log P.
// Priced as a merge tree, it lost picks it should have won (2^20 float32 at 50% Zipf density on
// 8 hosts: measured DSAR 57.0 ms, dense 70.5, split-allgather 71.0; docs/sparse.md).
TEST(SparseCostModel, DsarAddsItsBlocksInOnePass) {
  // One pass per received entry: doubling the ranks at the same per-rank entries and range
  // imbalance adds the smaller ranges' dense passes, not a merge level over every entry.
  hvds_sparse_net_t work_only = {1e-15, 1e-15, 1e-9, 0, 0, 0, 0};
  auto at = [&](int P) {
    hvds_sparse_problem_t y = {P, 1 << 24, 1, 4, 4, 1 << 14, 0, 0, 0, 1, -1, 0, 0};
    return hvds__sparse_cost(HVDS_SPARSE_DSAR, &y, &work_only);
  };
  double dense_pass = (1 << 24) * 4 / 16.0 * 1e-9;  // a step per 16 bytes of the dense range
  EXPECT_NEAR(at(16) - at(8), dense_pass * (1.0 / 16 - 1.0 / 8), 1e-3 * at(8));
}

// The round latency (a step that waits for its peer to be woken) is charged per synchronizing
// round: recursive doubling's count and payload to one partner are one round, the split
// algorithms' count and payload exchanges are separate ones. At P = 4: recursive doubling 2,
// allgather 3, dense 4 (halving-doubling), DSAR 9, split-allgather 10, ZEN 13; at P = 3 the
// fold and unfold add 2 to recursive doubling and split-allgather.
TEST(SparseCostModel, RoundLatencyPerSynchronizingRound) {
  hvds_sparse_net_t net = {10e-6, 1.0 / 125e6, 0, 0, 0, 0, 0};
  hvds_sparse_net_t slow = net;
  slow.round = 100e-6;
  struct {
    int P;
    hvds_sparse_algo_t a;
    int rounds;
  } cases[] = {{4, HVDS_SPARSE_SSAR_RD, 2},   {4, HVDS_SPARSE_ALLGATHER, 3},
               {4, HVDS_SPARSE_DENSE, 4},     {4, HVDS_SPARSE_DSAR, 9},
               {4, HVDS_SPARSE_SSAR_SAG, 10}, {4, HVDS_SPARSE_ZEN, 13},
               {3, HVDS_SPARSE_SSAR_RD, 3},   {3, HVDS_SPARSE_SSAR_SAG, 6}};
  for (const auto& c : cases) {
    auto x = problem(c.P, 1 << 20, 0.001, 0.5);
    double extra = hvds__sparse_cost(c.a, &x, &slow) - hvds__sparse_cost(c.a, &x, &net);
    EXPECT_NEAR(extra, c.rounds * 100e-6, 1e-9) << "algorithm " << c.a << " P " << c.P;
  }
  // Small messages: with the rounds priced, recursive doubling's few rounds beat
  // split-allgather's many.
  auto x = problem(4, 1 << 20, 0.001, 0.5);
  EXPECT_EQ(hvds__sparse_select(&x, &slow, nullptr), HVDS_SPARSE_SSAR_RD);
}

// Recursive doubling's rounds, split-allgather's and ZEN's gathers delta-code their indices where
// the bytes saved cost more link time than the coding costs local work: on a 1 Gbit/s link, not
// on a 100 Gbit/s one with the same local speed. The forced modes win, quantized gathers always
// pack (recursive doubling, which sums as it goes, is never quantized), and the algorithms
// without packing never do. The price is the cheaper of the two.
TEST(SparseCostModel, PackedStreamsWhereTheLinkIsSlow) {
  hvds_sparse_net_t slow = {10e-6, 1.0 / 125e6, 5e-9, 15e-9, 0, 0, 50e-6};
  hvds_sparse_net_t fast = slow;
  fast.beta = 1.0 / 12.5e9;
  for (int P : {4, 5}) {  // 5: recursive doubling and split-allgather fold
    auto x = problem(P, 1 << 24, 0.005, 0.24);
    for (hvds_sparse_algo_t a : {HVDS_SPARSE_SSAR_RD, HVDS_SPARSE_SSAR_SAG, HVDS_SPARSE_ZEN}) {
      EXPECT_EQ(hvds__sparse_packs(a, &x, &slow), 1) << (int)a << " P " << P;
      EXPECT_EQ(hvds__sparse_packs(a, &x, &fast), 0) << (int)a << " P " << P;
      auto never = x, always = x, quantized = x;
      never.pack_indices = -1;
      always.pack_indices = 1;
      quantized.pack_indices = -1;
      quantized.quant_bits = 4;
      EXPECT_EQ(hvds__sparse_packs(a, &never, &slow), 0);
      EXPECT_EQ(hvds__sparse_packs(a, &always, &fast), 1);
      EXPECT_EQ(hvds__sparse_packs(a, &quantized, &fast), a == HVDS_SPARSE_SSAR_RD ? 0 : 1);
      for (const hvds_sparse_net_t* net : {&slow, &fast}) {
        double best = hvds__sparse_cost(a, &x, net);
        EXPECT_LE(best, hvds__sparse_cost(a, &never, net));
        EXPECT_LE(best, hvds__sparse_cost(a, &always, net));
      }
      EXPECT_LT(hvds__sparse_cost(a, &always, &slow), hvds__sparse_cost(a, &never, &slow));
    }
    auto always = x;
    always.pack_indices = 1;
    for (hvds_sparse_algo_t a : {HVDS_SPARSE_DENSE, HVDS_SPARSE_ALLGATHER, HVDS_SPARSE_DSAR}) {
      EXPECT_EQ(hvds__sparse_packs(a, &always, &slow), 0) << (int)a;
      auto never = always;
      never.pack_indices = -1;
      EXPECT_EQ(hvds__sparse_cost(a, &always, &slow), hvds__sparse_cost(a, &never, &slow));
    }
  }
}
