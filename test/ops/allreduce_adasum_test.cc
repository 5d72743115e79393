// Adasum allreduce, ranks as threads: against a serial reference of the same combination tree
// (in double), with orthogonal gradients (they add) and parallel ones (they average), fused
// tensors of every size class, every float dtype, 1 to 8 ranks.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "inproc_p2p.h"
#include "test_util.h"

using namespace hvds_test;

namespace {

typedef std::vector<double> Vec;

// The paper's combination of two gradients.
Vec Combine(const Vec& a, const Vec& b) {
  double dot = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); i++) {
    dot += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  const double tiny = std::sqrt(2.2250738585072014e-308);
  double ca = aa >= tiny ? 1 - dot / (2 * aa) : 1, cb = bb >= tiny ? 1 - dot / (2 * bb) : 1;
  Vec out(a.size());
  for (size_t i = 0; i < a.size(); i++) out[i] = ca * a[i] + cb * b[i];
  return out;
}

// The tree the algorithm follows: ranks past the largest power of two fold into rank - P2,
// then pairs at distance 1, 2, 4, ..
Vec Reference(std::vector<Vec> v) {
  int P = (int)v.size(), p2 = 1;
  while (p2 * 2 <= P) p2 *= 2;
  for (int r = p2; r < P; r++) v[r - p2] = Combine(v[r - p2], v[r]);
  for (int level = 1; level < p2; level <<= 1)
    for (int n = 0; n < p2; n += 2 * level) v[n] = Combine(v[n], v[n + level]);
  return v[0];
}

// Runs Adasum on every rank over tensors of the given sizes, inputs[rank][tensor] (doubles,
// stored as dtype), and checks every rank's result against want[tensor] within rel.
void Check(hvds_dtype_t dt, const std::vector<size_t>& counts,
           const std::vector<std::vector<Vec>>& inputs, const std::vector<Vec>& want, double rel) {
  int P = (int)inputs.size();
  size_t total = 0;
  for (size_t c : counts) total += c;
  size_t esz = hvds__dtype_bytes(dt);
  auto world = inproc_world(P);
  inproc_spawn(world, [&](hvds_p2p_t* p) {
    std::vector<char> buf(total * esz + 1);
    size_t at = 0;
    for (size_t t = 0; t < counts.size(); t++)
      for (size_t i = 0; i < counts[t]; i++) set(dt, buf.data(), at++, inputs[p->rank][t][i]);
    ASSERT_EQ(hvds__allreduce_adasum(p, buf.data(), counts.data(), (int)counts.size(), dt, 7),
              HVDS_SUCCESS)
        << p->error;
    at = 0;
    for (size_t t = 0; t < counts.size(); t++) {
      double norm = 0;
      for (double w : want[t]) norm = std::max(norm, std::fabs(w));
      for (size_t i = 0; i < counts[t]; i++, at++)
        ASSERT_NEAR(get(dt, buf.data(), at), want[t][i], rel * (norm + 1e-30))
            << "rank " << p->rank << " of " << P << ", tensor " << t << ", element " << i;
    }
  });
  EXPECT_EQ(inproc_pending_messages(world.get()), 0u) << "unreceived messages";
}

std::vector<size_t> Sizes(int P) { return {0, 1, (size_t)P - 1, 7, 1001, 3}; }

// inputs[rank][tensor], values as dtype rounds them.
std::vector<std::vector<Vec>> RandomInputs(int P, const std::vector<size_t>& counts,
                                           hvds_dtype_t dt, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> normal(0, 1);
  std::vector<std::vector<Vec>> in(P);
  char cell[8];
  for (int r = 0; r < P; r++)
    for (size_t c : counts) {
      Vec v(c);
      for (double& x : v) {
        set(dt, cell, 0, normal(gen) + (r % 2 ? 0.5 : -0.25));
        x = get(dt, cell, 0);
      }
      in[r].push_back(v);
    }
  return in;
}

double Tolerance(hvds_dtype_t dt) {
  return dt == HVDS_FLOAT64 ? 1e-12 : dt == HVDS_FLOAT32 ? 1e-5 : dt == HVDS_FLOAT16 ? 4e-3 : 3e-2;
}

}  // namespace

TEST(AllreduceAdasum, MatchesTheReferenceTreeForEveryFloatTypeAndSize) {
  for (hvds_dtype_t dt : {HVDS_FLOAT64, HVDS_FLOAT32, HVDS_FLOAT16, HVDS_BFLOAT16})
    for (int P = 1; P <= 8; P++) {
      SCOPED_TRACE(std::string(dtype_str(dt)) + " np " + std::to_string(P));
      std::vector<size_t> counts = Sizes(P);
      auto in = RandomInputs(P, counts, dt, 17 + P);
      std::vector<Vec> want;
      for (size_t t = 0; t < counts.size(); t++) {
        std::vector<Vec> per_rank;
        for (int r = 0; r < P; r++) per_rank.push_back(in[r][t]);
        want.push_back(Reference(per_rank));
      }
      Check(dt, counts, in, want, Tolerance(dt));
    }
}

TEST(AllreduceAdasum, OrthogonalGradientsAddAndParallelOnesAverage) {
  for (int P : {2, 3, 4, 8}) {
    SCOPED_TRACE("np " + std::to_string(P));
    size_t n = 64;
    std::vector<std::vector<Vec>> orth(P), par(P);
    Vec sum(n, 0), dir(n);
    for (size_t i = 0; i < n; i++) dir[i] = std::sin(0.1 * (double)i) + 0.2;
    for (int r = 0; r < P; r++) {
      Vec e(n, 0);
      for (size_t i = (size_t)r; i < n; i += (size_t)P) e[i] = 1.0 + r;  // disjoint supports
      for (size_t i = 0; i < n; i++) sum[i] += e[i];
      orth[r].push_back(e);
      par[r].push_back(dir);
    }
    Check(HVDS_FLOAT64, {n}, orth, {sum}, 1e-12);
    Check(HVDS_FLOAT64, {n}, par, {dir}, 1e-12);
  }
}

TEST(AllreduceAdasum, IntegersAreRefusedOnEveryRankWithoutMessages) {
  auto world = inproc_world(3);
  inproc_spawn(world, [&](hvds_p2p_t* p) {
    int32_t v[4] = {1, 2, 3, 4};
    size_t count = 4;
    EXPECT_EQ(hvds__allreduce_adasum(p, v, &count, 1, HVDS_INT32, 1), HVDS_INVALID_ARGUMENT);
    EXPECT_NE(std::string(p->error).find("Adasum reduces float16, bfloat16, float32 and float64"),
              std::string::npos)
        << p->error;
  });
  EXPECT_EQ(inproc_pending_messages(world.get()), 0u);
}
