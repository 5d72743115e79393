/* Calibration: gamma from a local timing of the reduction kernel; the runtime overhead and alpha
 * by a robust line fit over the small allreduces at the smallest rank count, alpha at each larger
 * count over its own small allreduces; beta from the largest allreduce at the smallest count;
 * then the model's prediction for every measured row (sim.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "reduce.h"
#include "sim.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

double hvds_sim_measure_gamma(size_t seg, double budget_s) {
  // As in a reduce step: the received segment (in scratch) is folded into successive segments
  // of a buffer much larger than the caches.
  const size_t big = (size_t)64 << 20;
  if (seg == 0 || seg > big) seg = (size_t)1 << 20;
  seg -= seg % sizeof(float);
  float* dst = malloc(big);
  float* src = malloc(seg);
  if (dst == NULL || src == NULL) {
    free(dst);
    free(src);
    return 0;
  }
  for (size_t i = 0; i < big / sizeof(float); i++) dst[i] = (float)(i % 7);
  for (size_t i = 0; i < seg / sizeof(float); i++) src[i] = 1.0f;
  double runs[15];
  int nr = 0;
  double start = now_s();
  while (nr < 15 && (nr < 3 || now_s() - start < budget_s)) {
    double t0 = now_s();
    for (size_t off = 0; off + seg <= big; off += seg)
      hvds__reduce((char*)dst + off, src, seg / sizeof(float), HVDS_FLOAT32, HVDS_SUM);
    runs[nr++] = (now_s() - t0) / (double)(big / seg * seg);
  }
  qsort(runs, (size_t)nr, sizeof runs[0], cmp_double);
  free(dst);
  free(src);
  return runs[nr / 2];
}

double hvds_sim_measure_copy(double budget_s) {
  const size_t big = (size_t)64 << 20;
  static volatile char sink;
  char* src = malloc(big);
  if (src == NULL) return 0;
  memset(src, 1, big);
  double runs[15];
  int nr = 0;
  double start = now_s();
  while (nr < 15 && (nr < 3 || now_s() - start < budget_s)) {
    double t0 = now_s();
    char* dst = malloc(big);  // fresh pages every time, as an output tensor is
    if (dst == NULL) break;
    memcpy(dst, src, big);
    sink += dst[big / 2];  // the copy is used, so it stays
    runs[nr++] = (now_s() - t0) / (double)big;
    free(dst);
  }
  free(src);
  if (nr == 0) return 0;
  qsort(runs, (size_t)nr, sizeof runs[0], cmp_double);
  return runs[nr / 2];
}

/* Ranks per core when P ranks share f->cores. */
static double cpu_share(const hvds_sim_fit_opts_t* f, int P) {
  return f->cores > 0 && P > f->cores ? (double)P / f->cores : 1;
}

hvds_sim_net_t hvds_sim_fit_net(const hvds_sim_fit_t* fit, const hvds_sim_fit_opts_t* f, int P) {
  hvds_sim_net_t n = fit->net;
  for (int i = 0; i < fit->nP; i++)
    if (fit->P[i] == P) n.alpha = fit->alpha[i];
  n.cpu_share = cpu_share(f, P);
  return n;
}

/* The prediction for r under net with alpha as given (cpu_share set for r's P). */
static double predict_at(const hvds_sim_obs_t* r, const hvds_sim_cfg_t* c,
                         const hvds_sim_fit_opts_t* f, hvds_sim_net_t net, const char** algo) {
  net.cpu_share = cpu_share(f, r->P);
  return hvds_sim_runtime_coll(&net, c, r->coll, r->P, r->bytes, 4, algo);
}

/* The value of *field, a member of *net (beta or copy), for which row r is predicted exactly:
 * bisection in log space over [lo, hi] (time grows with either); lo when even lo predicts too
 * long. *net is scratch. */
static double solve(const hvds_sim_obs_t* r, const hvds_sim_cfg_t* c, const hvds_sim_fit_opts_t* f,
                    hvds_sim_net_t* net, double* field, double lo, double hi) {
  *field = lo;
  if (predict_at(r, c, f, *net, NULL) >= r->measured_s) return lo;
  for (int i = 0; i < 200; i++) {
    *field = sqrt(lo * hi);
    if (predict_at(r, c, f, *net, NULL) < r->measured_s)
      lo = *field;
    else
      hi = *field;
  }
  return 0.5 * (lo + hi);
}

/* The largest row of coll at P, or -1. */
static int largest(const hvds_sim_obs_t* rows, int n, hvds_sim_coll_t coll, int P) {
  int best = -1;
  for (int i = 0; i < n; i++)
    if (rows[i].coll == coll && rows[i].P == P && (best < 0 || rows[i].bytes > rows[best].bytes))
      best = i;
  return best;
}

static int is_small(const hvds_sim_obs_t* r, const hvds_sim_fit_opts_t* f) {
  return r->coll == HVDS_SIM_ALLREDUCE && r->bytes <= f->small_max;
}

/* A small row as y = overhead + alpha m: m its message steps (negotiation and algorithm), y its
 * time less the byte terms at the nominal beta. */
static void small_terms(const hvds_sim_obs_t* r, const hvds_sim_cfg_t* c,
                        const hvds_sim_fit_opts_t* f, double* m, double* y) {
  hvds_sim_net_t a0 = {0, f->beta0, f->gamma, 0, 1, 0}, a1 = a0;
  a1.alpha = 1e-3;  // any positive value: the model is linear in alpha
  double t0 = predict_at(r, c, f, a0, NULL);
  *m = (predict_at(r, c, f, a1, NULL) - t0) / 1e-3;
  *y = r->measured_s - t0;
}

#define MAX_SMALL 64 /* small rows per rank count taken into a fit */

static double median_of(double* v, int k) {
  qsort(v, (size_t)k, sizeof *v, cmp_double);
  return k % 2 ? v[k / 2] : 0.5 * (v[k / 2 - 1] + v[k / 2]);
}

/* The small rows at P as (m, y) pairs, marked as used; returns how many. */
static int small_rows(hvds_sim_obs_t* rows, int n, int P, const hvds_sim_cfg_t* c,
                      const hvds_sim_fit_opts_t* f, double* m, double* y) {
  int k = 0;
  for (int i = 0; i < n && k < MAX_SMALL; i++) {
    if (rows[i].P != P || !is_small(&rows[i], f)) continue;
    small_terms(&rows[i], c, f, &m[k], &y[k]);
    rows[i].used_in_fit = 1;
    k++;
  }
  return k;
}

/* Overhead and alpha at rank count P as a robust line (Theil-Sen: the median of the pairwise
 * slopes, then the median intercept), so that one slow row (a first operation's set-up, a
 * scheduling stall) does not move the line; -1 when the rows do not tell them apart. */
static int fit_base(hvds_sim_obs_t* rows, int n, int P, const hvds_sim_cfg_t* c,
                    const hvds_sim_fit_opts_t* f, double* alpha, double* overhead) {
  double m[MAX_SMALL], y[MAX_SMALL], slopes[MAX_SMALL * (MAX_SMALL - 1) / 2], rest[MAX_SMALL];
  int k = small_rows(rows, n, P, c, f, m, y), ns = 0;
  for (int i = 0; i < k; i++)
    for (int j = i + 1; j < k; j++)
      if (fabs(m[j] - m[i]) > 1e-9) slopes[ns++] = (y[j] - y[i]) / (m[j] - m[i]);
  if (k < 2 || ns == 0) return -1;
  *alpha = median_of(slopes, ns);
  if (*alpha < 0) *alpha = 0;
  for (int i = 0; i < k; i++) rest[i] = y[i] - *alpha * m[i];
  *overhead = median_of(rest, k);
  if (*overhead < 0) *overhead = 0;
  return 0;
}

/* Alpha at P with the overhead known: the median over the small rows, for the same reason. */
static double fit_alpha(hvds_sim_obs_t* rows, int n, int P, const hvds_sim_cfg_t* c,
                        const hvds_sim_fit_opts_t* f, double overhead, int* found) {
  double m[MAX_SMALL], y[MAX_SMALL], a[MAX_SMALL];
  int k = small_rows(rows, n, P, c, f, m, y), na = 0;
  *found = k > 0;
  for (int i = 0; i < k; i++)
    if (m[i] > 0) a[na++] = (y[i] - overhead) / m[i];
  double alpha = na > 0 ? median_of(a, na) : 0;
  return alpha > 0 ? alpha : 0;
}

int hvds_sim_fit(hvds_sim_obs_t* rows, int n, const hvds_sim_cfg_t* c, const hvds_sim_fit_opts_t* f,
                 hvds_sim_fit_t* fit) {
  memset(fit, 0, sizeof *fit);
  int Pmin = 0;
  for (int i = 0; i < n; i++) {
    rows[i].used_in_fit = 0;
    if (Pmin == 0 || rows[i].P < Pmin) Pmin = rows[i].P;
  }
  double alpha, overhead;
  if (fit_base(rows, n, Pmin, c, f, &alpha, &overhead) != 0) return -1;
  fit->net = (hvds_sim_net_t){alpha, f->beta0, f->gamma, overhead, 1, 0};
  // Alpha at every rank count, the smallest first.
  for (int i = 0; i < n && fit->nP < HVDS_SIM_FIT_MAX_P; i++) {
    int seen = 0, found;
    for (int k = 0; k < fit->nP; k++) seen |= fit->P[k] == rows[i].P;
    if (seen) continue;
    double a = rows[i].P == Pmin ? alpha : fit_alpha(rows, n, rows[i].P, c, f, overhead, &found);
    if (rows[i].P != Pmin && !found) a = alpha;
    fit->P[fit->nP] = rows[i].P;
    fit->alpha[fit->nP++] = a;
  }
  // Beta: the largest allreduce at the smallest P, where the link dominates most clearly (one
  // tensor reduced in place: no copies).
  int big = largest(rows, n, HVDS_SIM_ALLREDUCE, Pmin);
  if (big < 0 || rows[big].bytes <= f->small_max) return -1;
  hvds_sim_net_t net = fit->net;
  fit->net.beta = solve(&rows[big], c, f, &net, &net.beta, 1e-13, 1e-5);
  rows[big].used_in_fit = 1;
  // Copy: the largest allgather (else reducescatter) at the smallest P, beta now known.
  int cp = largest(rows, n, HVDS_SIM_ALLGATHER, Pmin);
  if (cp < 0) cp = largest(rows, n, HVDS_SIM_REDUCESCATTER, Pmin);
  if (cp >= 0) {
    net = fit->net;
    double v = solve(&rows[cp], c, f, &net, &net.copy, 1e-14, 1e-6);
    fit->net.copy = v > 1e-14 ? v : 0;
    rows[cp].used_in_fit = 1;
  }
  return 0;
}

void hvds_sim_fit_predict(hvds_sim_obs_t* rows, int n, const hvds_sim_cfg_t* c,
                          const hvds_sim_fit_opts_t* f, const hvds_sim_fit_t* fit) {
  for (int i = 0; i < n; i++) {
    hvds_sim_net_t net = hvds_sim_fit_net(fit, f, rows[i].P);
    rows[i].predicted_s = predict_at(&rows[i], c, f, net, &rows[i].algo);
  }
}
