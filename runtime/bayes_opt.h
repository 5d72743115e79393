/* Bayesian optimisation over the unit box [0, 1]^dims: a Gaussian process (squared-exponential
 * kernel, fixed noise) fitted to the points seen, and the next point picked by expected
 * improvement over a deterministic set of candidates. Maximises. Small by design: tens of
 * points, a few dimensions (autotune's fusion threshold and cycle time). */
#ifndef HVDS_BAYES_OPT_H_
#define HVDS_BAYES_OPT_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HVDS_BO_MAX_DIMS 4
#define HVDS_BO_MAX_POINTS 64

typedef struct {
  int dims;
  double noise;       /* observation noise variance, relative to the normalised scores */
  double length;      /* kernel length scale in unit-box coordinates */
  double xi;          /* exploration margin of expected improvement */
  int n;              /* points seen */
  double x[HVDS_BO_MAX_POINTS][HVDS_BO_MAX_DIMS];
  double y[HVDS_BO_MAX_POINTS];
  uint64_t rng;       /* candidate generator state: identical runs pick identical points */
} hvds_bo_t;

void hvds__bo_init(hvds_bo_t* bo, int dims, double noise, uint64_t seed);
/* Records score y at point x. Returns -1 when full. */
int hvds__bo_add(hvds_bo_t* bo, const double* x, double y);
/* The point with the largest expected improvement (x OUT, dims values in [0, 1]). */
void hvds__bo_next(hvds_bo_t* bo, double* x);
/* The best point seen so far and its score; -1 when none. */
int hvds__bo_best(const hvds_bo_t* bo, double* x, double* y);
/* The fitted posterior mean and standard deviation at x (for tests and logs). */
void hvds__bo_predict(const hvds_bo_t* bo, const double* x, double* mean, double* sd);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_BAYES_OPT_H_ */
