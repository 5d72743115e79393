/* hvdsparse-perf: bandwidth and correctness of hvdsparse's collectives over a size sweep, in the
 * manner of nccl-tests. Run under the launcher: hvdsparse run -np 4 hvdsparse-perf allreduce ...
 *
 * For each size every rank runs -w untimed and -n timed operations, each timed from the enqueue
 * to the end of hvds_wait() with no barrier in between; an iteration's time is the slowest rank's.
 * Every iteration of a size reuses one tensor name, so steady state takes the response cache's
 * fast path as training does. Then one untimed operation on fresh inputs is checked. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "perf.h"

#define WAIT_TIMEOUT_MS 300000

// One operation: enqueue, wait, release. Stores the enqueue-to-done time in *us when not NULL.
static int run_op(perf_case_t* c, const perf_coll_t* coll, double* us) {
  hvds_handle_t h = 0;
  double t0 = hvds_bench_now_us();
  hvds_result_t rc = coll->start(c, &h);
  if (rc == HVDS_SUCCESS) rc = hvds_wait(h, WAIT_TIMEOUT_MS);
  double t1 = hvds_bench_now_us();
  if (rc != HVDS_SUCCESS) {
    fprintf(stderr, "rank %d: %s '%s' failed: %s: %s\n", c->a->rank, coll->name, c->name,
            hvds_result_str(rc), h ? hvds_handle_error(h) : hvds_last_error());
    hvds_release(h);
    return -1;
  }
  hvds_release(h);
  if (us != NULL) *us = t1 - t0;
  return 0;
}

// The checked operation on fresh inputs; *wrong = -1 when checking is off.
static int run_check(perf_case_t* c, const perf_coll_t* coll, long* wrong, double* max_err) {
  *wrong = -1;
  *max_err = 0;
  if (!c->a->sweep.check) return 0;
  if (coll->refill != NULL) coll->refill(c);
  hvds_handle_t h = 0;
  hvds_result_t rc = coll->start(c, &h);
  if (rc == HVDS_SUCCESS) rc = hvds_wait(h, WAIT_TIMEOUT_MS);
  if (rc != HVDS_SUCCESS) {
    fprintf(stderr, "rank %d: checked %s '%s' failed: %s\n", c->a->rank, coll->name, c->name,
            hvds_result_str(rc));
    hvds_release(h);
    return -1;
  }
  *wrong = coll->check(c, h, max_err);
  hvds_release(h);
  return 0;
}

// Combines every rank's times (max per iteration), largest error (max) and wrong count (sum).
static int reduce_stats(const perf_args_t* a, double* stats, int n, long* wrong) {
  hvds_tensor_t t = {stats, HVDS_FLOAT64, -1, 1, {n}};
  int64_t w = *wrong;
  hvds_tensor_t tw = {&w, HVDS_INT64, -1, 1, {1}};
  hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
  hvds_handle_t h1 = 0, h2 = 0;
  o.name = "perf.stats.max";
  o.op = HVDS_MAX;
  hvds_result_t rc = hvds_allreduce_async(&t, &t, &o, &h1);
  o.name = "perf.stats.sum";
  o.op = HVDS_SUM;
  if (rc == HVDS_SUCCESS) rc = hvds_allreduce_async(&tw, &tw, &o, &h2);
  if (rc == HVDS_SUCCESS) rc = hvds_wait(h1, WAIT_TIMEOUT_MS);
  if (rc == HVDS_SUCCESS) rc = hvds_wait(h2, WAIT_TIMEOUT_MS);
  hvds_release(h1);
  hvds_release(h2);
  if (rc != HVDS_SUCCESS) {
    fprintf(stderr, "rank %d: combining statistics failed: %s\n", a->rank, hvds_result_str(rc));
    return -1;
  }
  if (*wrong >= 0) *wrong = (long)w;
  return 0;
}

/* --times: the iterations' times in the order they ran, before the statistics sort them. */
static int write_times(const perf_args_t* a, size_t bytes, const double* t, int n) {
  if (a->times == NULL || a->rank != 0) return 0;
  FILE* f = fopen(a->times, "a");
  if (f == NULL) {
    fprintf(stderr, "rank 0: cannot write --times file %s\n", a->times);
    return -1;
  }
  for (int i = 0; i < n; i++) fprintf(f, "%zu,%d,%.3f\n", bytes, i, t[i]);
  return fclose(f) == 0 ? 0 : -1;
}

/* --pause: every rank leaves its CPU idle for ms, as ranks do while a step computes. */
static void pause_all(int ms) {
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

/* Runs one size. Returns 0 with *row filled, 1 when the size holds no element, -1 on failure. */
static int run_size(const perf_args_t* a, const perf_coll_t* coll, size_t bytes, double* stats,
                    hvds_bench_row_t* row) {
  perf_case_t c = {a, 0, hvds_dtype_size(a->dtype), "", NULL, NULL};
  c.count = coll->count_for(bytes, c.esz, a->np);
  if (c.count == 0) return 1;
  snprintf(c.name, sizeof(c.name), "perf.%s.%zu", coll->name, c.count);
  int rc = coll->setup(&c);
  if (rc != 0) fprintf(stderr, "rank %d: out of memory at %zu bytes\n", a->rank, bytes);
  for (int i = 0; rc == 0 && i < a->sweep.warmup; i++) rc = run_op(&c, coll, NULL);
  for (int i = 0; rc == 0 && i < a->sweep.iters; i++) {
    if (a->pause_ms > 0 && i == a->sweep.iters / 2) pause_all(a->pause_ms);
    rc = run_op(&c, coll, &stats[i]);
  }
  long wrong = -1;
  double max_err = 0;
  if (rc == 0) rc = run_check(&c, coll, &wrong, &max_err);
  coll->teardown(&c);
  if (rc != 0) return -1;
  stats[a->sweep.iters] = max_err;
  if (reduce_stats(a, stats, a->sweep.iters + 1, &wrong) != 0) return -1;
  if (write_times(a, c.count * c.esz, stats, a->sweep.iters) != 0) return -1;
  hvds_bench_row_t r = {0};
  r.impl = a->sweep.label;
  r.coll = coll->name;
  r.np = a->np;
  r.bytes = c.count * c.esz;
  r.count = c.count;
  r.dtype = perf_dtype_label(a->dtype);
  r.redop = coll->reduces ? perf_op_label(a->op) : "none";
  r.wrong = wrong;
  r.max_err = stats[a->sweep.iters];
  hvds_bench_row_times(&r, stats, a->sweep.iters);
  hvds_bench_row_bandwidth(&r);
  *row = r;
  return 0;
}

static void print_header(const perf_args_t* a) {
  char title[96], info[160];
  snprintf(title, sizeof(title), "hvdsparse-perf %s", a->coll);
  snprintf(info, sizeof(info), "dtype %s, op %s, %s, hvdsparse %s", perf_dtype_label(a->dtype),
           perf_op_label(a->op), a->inplace ? "in place" : "out of place", HVDS_VERSION_STRING);
  hvds_bench_print_header(stdout, title, info, &a->sweep, a->np);
}

int main(int argc, char** argv) {
  if (argc >= 2 && !strcmp(argv[1], "sparse_allreduce")) return perf_sparse_main(argc - 1, argv + 1);
  perf_args_t a;
  int rc = perf_parse_args(argc, argv, &a);
  if (rc != 0) return rc > 0 ? 0 : 2;
  if (hvds_init() != HVDS_SUCCESS) {
    fprintf(stderr, "hvds_init failed: %s\n", hvds_last_error());
    return 1;
  }
  a.rank = hvds_rank();
  a.np = hvds_size();
  if (a.root < 0 || a.root >= a.np) {
    if (a.rank == 0) fprintf(stderr, "-r %d: no such rank\n", a.root);
    hvds_shutdown();
    return 2;
  }
  const perf_coll_t* coll = perf_find_coll(a.coll);
  double* stats = malloc(sizeof(double) * (size_t)(a.sweep.iters + 1));
  if (a.rank == 0) print_header(&a);
  long wrong_total = 0;
  double bw_sum = 0;
  int rows = 0, failed = stats == NULL;
  size_t bytes = a.sweep.min_bytes ? a.sweep.min_bytes : 1;
  for (; !failed && bytes <= a.sweep.max_bytes; bytes *= a.sweep.factor) {
    hvds_bench_row_t row;
    rc = run_size(&a, coll, bytes, stats, &row);
    failed = rc < 0;
    if (rc != 0) continue;
    if (a.rank == 0) hvds_bench_print_row(stdout, &row, a.sweep.csv);
    wrong_total += row.wrong > 0 ? row.wrong : 0;
    bw_sum += row.busbw;
    rows++;
    if (bytes > a.sweep.max_bytes / a.sweep.factor) break;  // the next step would overflow
  }
  if (a.rank == 0)
    hvds_bench_print_footer(stdout, wrong_total, rows ? bw_sum / rows : 0, a.sweep.check);
  free(stats);
  hvds_shutdown();
  if (failed && a.rank == 0) fprintf(stderr, "hvdsparse-perf: a collective failed; see above\n");
  return failed || wrong_total > 0 ? 1 : 0;
}
