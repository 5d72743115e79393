/* Gaussian-process regression and expected improvement (bayes_opt.h). */
#include "bayes_opt.h"

#include <math.h>
#include <string.h>

#define CANDIDATES 512

void hvds__bo_init(hvds_bo_t* bo, int dims, double noise, uint64_t seed) {
  memset(bo, 0, sizeof(*bo));
  bo->dims = dims < 1 ? 1 : dims > HVDS_BO_MAX_DIMS ? HVDS_BO_MAX_DIMS : dims;
  bo->noise = noise > 0 ? noise : 1e-6;
  bo->length = 0.25;
  bo->xi = 0.01;
  bo->rng = seed ? seed : 0x9e3779b97f4a7c15ull;
}

int hvds__bo_add(hvds_bo_t* bo, const double* x, double y) {
  if (bo->n >= HVDS_BO_MAX_POINTS) return -1;
  memcpy(bo->x[bo->n], x, (size_t)bo->dims * sizeof(double));
  bo->y[bo->n++] = y;
  return 0;
}

static double kernel(const hvds_bo_t* bo, const double* a, const double* b) {
  double d2 = 0;
  for (int i = 0; i < bo->dims; i++) d2 += (a[i] - b[i]) * (a[i] - b[i]);
  return exp(-0.5 * d2 / (bo->length * bo->length));
}

/* The fit: L (lower Cholesky factor of K + noise I), alpha = K^-1 y_n, and the normalisation. */
typedef struct {
  double l[HVDS_BO_MAX_POINTS][HVDS_BO_MAX_POINTS];
  double alpha[HVDS_BO_MAX_POINTS];
  double mean, scale;
} fit_t;

static void fit(const hvds_bo_t* bo, fit_t* f) {
  int n = bo->n;
  f->mean = 0;
  for (int i = 0; i < n; i++) f->mean += bo->y[i] / n;
  double var = 0;
  for (int i = 0; i < n; i++) var += (bo->y[i] - f->mean) * (bo->y[i] - f->mean) / n;
  f->scale = var > 0 ? sqrt(var) : 1.0;
  for (int i = 0; i < n; i++) {
    for (int j = 0; j <= i; j++) {
      double s = kernel(bo, bo->x[i], bo->x[j]) + (i == j ? bo->noise : 0);
      for (int k = 0; k < j; k++) s -= f->l[i][k] * f->l[j][k];
      f->l[i][j] = i == j ? sqrt(s > 1e-12 ? s : 1e-12) : s / f->l[j][j];
    }
  }
  double z[HVDS_BO_MAX_POINTS];
  for (int i = 0; i < n; i++) { /* L z = y_n */
    double s = (bo->y[i] - f->mean) / f->scale;
    for (int k = 0; k < i; k++) s -= f->l[i][k] * z[k];
    z[i] = s / f->l[i][i];
  }
  for (int i = n - 1; i >= 0; i--) { /* L^T alpha = z */
    double s = z[i];
    for (int k = i + 1; k < n; k++) s -= f->l[k][i] * f->alpha[k];
    f->alpha[i] = s / f->l[i][i];
  }
}

/* Posterior mean and standard deviation at x, in the normalised units of the fit. */
static void posterior(const hvds_bo_t* bo, const fit_t* f, const double* x, double* mu,
                      double* sd) {
  int n = bo->n;
  double ks[HVDS_BO_MAX_POINTS], v[HVDS_BO_MAX_POINTS];
  double m = 0;
  for (int i = 0; i < n; i++) {
    ks[i] = kernel(bo, x, bo->x[i]);
    m += ks[i] * f->alpha[i];
  }
  double var = 1.0;
  for (int i = 0; i < n; i++) { /* L v = k* */
    double s = ks[i];
    for (int k = 0; k < i; k++) s -= f->l[i][k] * v[k];
    v[i] = s / f->l[i][i];
    var -= v[i] * v[i];
  }
  *mu = m;
  *sd = var > 1e-12 ? sqrt(var) : 1e-6;
}

void hvds__bo_predict(const hvds_bo_t* bo, const double* x, double* mean, double* sd) {
  if (bo->n == 0) {
    *mean = 0;
    *sd = 1;
    return;
  }
  fit_t f;
  fit(bo, &f);
  double mu, s;
  posterior(bo, &f, x, &mu, &s);
  *mean = f.mean + mu * f.scale;
  *sd = s * f.scale;
}

static double uniform(uint64_t* s) { /* xorshift64* */
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return (double)((*s * 0x2545f4914f6cdd1dull) >> 11) / 9007199254740992.0;
}

int hvds__bo_best(const hvds_bo_t* bo, double* x, double* y) {
  if (bo->n == 0) return -1;
  int b = 0;
  for (int i = 1; i < bo->n; i++)
    if (bo->y[i] > bo->y[b]) b = i;
  if (x) memcpy(x, bo->x[b], (size_t)bo->dims * sizeof(double));
  if (y) *y = bo->y[b];
  return 0;
}

void hvds__bo_next(hvds_bo_t* bo, double* x) {
  if (bo->n == 0) {
    for (int d = 0; d < bo->dims; d++) x[d] = uniform(&bo->rng);
    return;
  }
  fit_t f;
  fit(bo, &f);
  double best_y;
  double best_x[HVDS_BO_MAX_DIMS];
  hvds__bo_best(bo, best_x, &best_y);
  double top = (best_y - f.mean) / f.scale;
  double pick_ei = -1;
  for (int c = 0; c < CANDIDATES; c++) {
    double cand[HVDS_BO_MAX_DIMS];
    for (int d = 0; d < bo->dims; d++) {
      /* Half the candidates explore the box, half look near the best point so far. */
      double u = uniform(&bo->rng);
      cand[d] = c % 2 ? u : best_x[d] + (u - 0.5) * 0.2;
      cand[d] = cand[d] < 0 ? 0 : cand[d] > 1 ? 1 : cand[d];
    }
    double mu, sd;
    posterior(bo, &f, cand, &mu, &sd);
    double z = (mu - top - bo->xi) / sd;
    double ei = (mu - top - bo->xi) * 0.5 * erfc(-z / sqrt(2.0)) +
                sd * exp(-0.5 * z * z) / sqrt(2.0 * 3.14159265358979323846);
    if (ei > pick_ei) {
      pick_ei = ei;
      memcpy(x, cand, (size_t)bo->dims * sizeof(double));
    }
  }
}
