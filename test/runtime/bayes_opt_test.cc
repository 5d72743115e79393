// Bayesian optimisation as autotune uses it: finds the top of a smooth 2-D function in 20 points,
// the fit passes through the observations, and identical runs choose identical points.
#include <gtest/gtest.h>

#include <cmath>

#include "bayes_opt.h"

namespace {

// A throughput-like surface: one broad optimum at (0.3, 0.7), value 10.
double Surface(const double* x) {
  double dx = x[0] - 0.3, dy = x[1] - 0.7;
  return 10.0 * std::exp(-(dx * dx + dy * dy) / 0.08);
}

TEST(BayesOpt, FindsTheOptimumWithinTwentyPoints) {
  hvds_bo_t bo;
  hvds__bo_init(&bo, 2, 1e-4, 7);
  const double seeds[][2] = {{0.06, 0.04}, {0.5, 0.5}, {0.25, 0.24}, {0.12, 0.09}};
  for (const auto& s : seeds) ASSERT_EQ(hvds__bo_add(&bo, s, Surface(s)), 0);
  for (int i = 4; i < 20; i++) {
    double x[2];
    hvds__bo_next(&bo, x);
    ASSERT_GE(x[0], 0.0);
    ASSERT_LE(x[1], 1.0);
    ASSERT_EQ(hvds__bo_add(&bo, x, Surface(x)), 0);
  }
  double best[2], y;
  ASSERT_EQ(hvds__bo_best(&bo, best, &y), 0);
  EXPECT_GT(y, 9.0) << "best point (" << best[0] << ", " << best[1] << ")";
}

TEST(BayesOpt, PosteriorFollowsTheObservations) {
  hvds_bo_t bo;
  hvds__bo_init(&bo, 1, 1e-6, 1);
  const double xs[] = {0.1, 0.5, 0.9};
  for (double x : xs) hvds__bo_add(&bo, &x, 3.0 * x);
  for (double x : xs) {
    double mean, sd;
    hvds__bo_predict(&bo, &x, &mean, &sd);
    EXPECT_NEAR(mean, 3.0 * x, 1e-2);
    EXPECT_LT(sd, 0.05);
  }
  double far = 0.3, mean, sd_near, sd_far;
  hvds__bo_predict(&bo, &xs[1], &mean, &sd_near);
  hvds__bo_predict(&bo, &far, &mean, &sd_far);
  EXPECT_GT(sd_far, sd_near);  // uncertain between the points
}

TEST(BayesOpt, IdenticalRunsPickIdenticalPoints) {
  double picks[2][2];
  for (int run = 0; run < 2; run++) {
    hvds_bo_t bo;
    hvds__bo_init(&bo, 2, 0.8, 42);
    double a[2] = {0.1, 0.2}, b[2] = {0.8, 0.6};
    hvds__bo_add(&bo, a, 1.0);
    hvds__bo_add(&bo, b, 2.0);
    hvds__bo_next(&bo, picks[run]);
  }
  EXPECT_EQ(picks[0][0], picks[1][0]);
  EXPECT_EQ(picks[0][1], picks[1][1]);
}

}  // namespace
