/* Shared pieces of hvdsparse-perf and the peer drivers (Gloo, MPI): the size sweep and its
 * options, the clock, median/min statistics, the bus-bandwidth factors, the test pattern and the
 * output (an nccl-tests style table, or CSV rows in one format for every tool).
 *
 * Plain C with no dependency on the runtime, so the C++ Gloo driver links it too. */
#ifndef HVDS_BENCH_UTIL_H_
#define HVDS_BENCH_UTIL_H_

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The options every tool shares. Initialise with hvds_bench_sweep_defaults(). */
typedef struct {
  size_t min_bytes;  /* -b */
  size_t max_bytes;  /* -e */
  size_t factor;     /* -f, at least 2 */
  int iters;         /* -n: timed iterations per size */
  int warmup;        /* -w: untimed iterations per size */
  int check;         /* -c: verify the result at every size */
  int csv;           /* --csv: machine-readable rows */
  const char* label; /* --label: the implementation column of the CSV */
} hvds_bench_sweep_t;

/* One output row. Times are over the timed iterations of the slowest rank's time for that
 * iteration: the median, the minimum, the maximum and the first (which shows what warms up when
 * the run has no warm-up iterations). */
typedef struct {
  const char* impl;
  const char* coll;
  int np;
  size_t bytes;
  size_t count;
  const char* dtype;
  const char* redop;
  double time_us;
  double min_us;
  double max_us;
  double first_us;
  double algbw; /* GB/s = bytes / time */
  double busbw; /* GB/s = algbw x the collective's factor */
  long wrong;   /* elements outside tolerance, summed over ranks; -1 when not checked */
  double max_err;
} hvds_bench_row_t;

void hvds_bench_sweep_defaults(hvds_bench_sweep_t* s, const char* label);

/* Parses "64", "8K", "256M", "1G" (powers of 1024). Returns 0, or -1 on a malformed size. */
int hvds_bench_parse_size(const char* text, size_t* out /* OUT */);

/* If argv[*i] is a sweep option, consumes it (and its value, advancing *i) and returns 1; returns
 * 0 when the option is not a sweep option and -1 (after printing why) on a bad value. */
int hvds_bench_parse_sweep_opt(int argc, char** argv, int* i, hvds_bench_sweep_t* s);

/* Prints the sweep options' help lines. */
void hvds_bench_sweep_usage(FILE* f);

/* Monotonic clock in microseconds. */
double hvds_bench_now_us(void);

/* Median and minimum of t[0..n-1]; sorts t in place. */
void hvds_bench_stats(double* t, int n, double* median /* OUT */, double* min /* OUT */);
/* The row's times from the n timed iterations t[] in run order (sorted in place). */
void hvds_bench_row_times(hvds_bench_row_t* row, double* t, int n);

/* Bus bandwidth over algorithm bandwidth for a collective on np ranks (nccl-tests' convention). */
double hvds_bench_bus_factor(const char* coll, int np);

/* Fills algbw and busbw from bytes, time_us, coll and np. */
void hvds_bench_row_bandwidth(hvds_bench_row_t* row);

/* Rank r's element i of the test pattern: a small positive integer (1..11), so sums, minima and
 * maxima of a few ranks are exact in every type. The pattern repeats every 11 elements. */
static inline int hvds_bench_value(int r, size_t i) {
  return (int)((i * 7 + (size_t)r * 5) % 11) + 1;
}

/* float32 helpers for the peer drivers: fill with rank's pattern; count the elements that differ
 * from the sum over np ranks, and the largest difference. */
void hvds_bench_fill_f32(float* p, size_t n, int rank);
long hvds_bench_check_sum_f32(const float* p, size_t n, int np, double* max_err /* OUT */);

/* The table header (or the CSV header line), one row, and the closing summary. title is printed in
 * the first comment line, e.g. "hvdsparse-perf allreduce", and info (may be NULL) in the second. */
void hvds_bench_print_header(FILE* f, const char* title, const char* info,
                             const hvds_bench_sweep_t* s, int np);
void hvds_bench_print_row(FILE* f, const hvds_bench_row_t* row, int csv);
void hvds_bench_print_footer(FILE* f, long wrong_total, double avg_busbw, int checked);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_BENCH_UTIL_H_ */
