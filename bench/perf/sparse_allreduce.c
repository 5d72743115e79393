/* hvdsparse-perf sparse_allreduce: every sparse allreduce algorithm on one synthetic sparse
 * gradient, timed, set against the cost model's prediction and the selector's pick, and checked
 * against the dense allreduce of the same data.
 *
 *   hvdsparse run -np 4 hvdsparse-perf sparse_allreduce -N 4M --density 0.01 [--row D]
 *       [--generator uniform|zipf|overlap|identical|disjoint] [--overlap X]
 *       [--algorithm NAME[,NAME...]|all]
 *       [-d float32|float64|...] [--index int32|int64] [--dense-out] [-n iters] [-w warmup]
 *       [--min-time S] [--csv]
 *
 * Every rank holds k = density * N entries (rows of D values when --row D > 1; the dense shape is
 * then [N, D]). Per algorithm: -w untimed and -n timed operations on the same tensor name
 * (spx.<algorithm>), each timed from the enqueue to the end of hvds_wait(); an iteration's time is
 * the slowest rank's; the table gives the median and minimum. With --min-time S, an algorithm
 * whose last warm-up was short runs more timed operations, enough for about S seconds. The model
 * column is the runtime's cost model for the algorithm that ran (alpha and beta as measured at
 * init), for the counts the preamble agreed and the overlap the runtime learned from the name's
 * previous operation (the warm-up's: the first operation of a name is priced as uniform); pick is
 * what the selector takes for them. The last timed result is compared with the plain
 * dense allreduce of every rank's data ("allreduce" row, also timed). With --interleave, the
 * timed operations after each algorithm's first -n run one of each algorithm in turn, so that a
 * change in the machine's load reaches every algorithm alike (on shared cores the same algorithm
 * timed a second apart can differ by 20%); the results are then checked after the first -n.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf.h"
#include "sparse_gen.h"
#include "sparse_rt.h"

#define WAIT_MS 300000
/* --min-time never asks for more timed operations than this. */
#define MIN_TIME_MAX_ITERS 1000

static const char* const kAlgos[] = {"auto",
                                     "dense",
                                     "allgather",
                                     "ssar_recursive_doubling",
                                     "ssar_split_allgather",
                                     "dsar_split_allgather",
                                     "zen"};
#define NUM_ALGOS 7

typedef struct {
  size_t n, row; /* dense shape [n] or [n, row] */
  double density;
  spx_gen_t gen;
  double overlap;
  const char* algorithm; /* a name, or "all" */
  hvds_dtype_t dtype, index_dtype;
  int dense_out;
  int iters, warmup, csv;
  int interleave;  /* the operations after the first -n round-robin over the algorithms */
  double min_time; /* seconds of timed operations to aim for (--min-time); 0: exactly -n */
  int quant_bits;  /* the gather phase's quantization width (--quant-bits); 0: none */
  uint64_t seed;
  int rank, np;
} spx_args_t;

/* This rank's data and the reference. */
typedef struct {
  size_t k;                  /* entries */
  void* indices;             /* k of index_dtype */
  void* values;              /* k * row */
  void* dense;               /* n * row: this rank's entries summed densely */
  void* ref;                 /* n * row: the dense allreduce of every rank's `dense` */
  void* out;                 /* n * row scratch: dense outputs */
  double* times;             /* (NUM_ALGOS + 1) rows of max_iters() + 1: per algorithm */
  hvds_sparse_stats_t stats; /* of the latest sparse run: the network and the agreed counts */
  int have_stats;
} spx_data_t;

typedef struct {
  const char* algorithm;
  const char* ran;
  double time_ms, min_ms, model_ms;
  const char* pick;
  double overlap; /* the overlap the model used (-1: uniform) */
  int iters;      /* timed operations */
  long long max_nnz, total_nnz, result_nnz;
  int dense_result;
  long wrong;
  hvds_sparse_stats_t model; /* what the model was given (valid when model_ms >= 0) */
} spx_row_t;

static void usage(FILE* f) {
  fprintf(
      f,
      "usage: hvdsparse run -np N hvdsparse-perf sparse_allreduce [options]\n"
      "  -N DIM              dense indices (elements, or rows with --row); K, M suffixes\n"
      "                      (default 4M)\n"
      "  --density F         entries per rank / DIM (default 0.01)\n"
      "  --row D             values per index: D > 1 makes rows of a [DIM, D] tensor (default 1)\n"
      "  --generator G       uniform | zipf | overlap | identical | disjoint (default uniform)\n"
      "  --overlap X         overlap: shared fraction of each rank's indices (default 0.5)\n"
      "  --algorithm A       auto | dense | allgather | ssar_recursive_doubling |\n"
      "                      ssar_split_allgather | dsar_split_allgather | zen | all (default),\n"
      "                      or several names separated by commas (one reference run for all)\n"
      "  -d TYPE             value type (default float32)\n"
      "  --index TYPE        int32 | int64 (default int32, int64 when DIM needs it)\n"
      "  --dense-out         write results densely (default: sparse results)\n"
      "  --quant-bits B      2 | 4 | 8: quantized values after the full-precision reduce\n"
      "                      (split-allgather, DSAR, ZEN); results checked within the bound\n"
      "  -n ITERS, -w WARMUP timed and untimed operations per algorithm (default 20, 3)\n"
      "  --min-time S        more timed operations (up to %d) when the last warm-up was short:\n"
      "                      enough for about S seconds per algorithm (default 0: -n exactly)\n"
      "  --interleave        after each algorithm's first -n operations, run the rest one of\n"
      "                      each algorithm in turn (load changes reach all alike)\n"
      "  --seed S            data seed (default 1)\n"
      "  --csv               machine-readable rows\n",
      MIN_TIME_MAX_ITERS);
}

static int need(int argc, char** argv, int i) {
  if (i + 1 < argc) return 1;
  fprintf(stderr, "%s needs a value\n", argv[i]);
  return 0;
}

/* Returns 0, 1 after help, -1 on a bad option. */
static int parse(int argc, char** argv, spx_args_t* a) {
  *a = (spx_args_t){.n = 4u << 20,
                    .row = 1,
                    .density = 0.01,
                    .gen = SPX_UNIFORM,
                    .overlap = 0.5,
                    .algorithm = "all",
                    .dtype = HVDS_FLOAT32,
                    .index_dtype = HVDS_INT32,
                    .iters = 20,
                    .warmup = 3,
                    .seed = 1};
  int index_set = 0;
  for (int i = 1; i < argc; i++) {
    const char* o = argv[i];
    if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
      usage(stdout);
      return 1;
    } else if (!strcmp(o, "--dense-out")) {
      a->dense_out = 1;
    } else if (!strcmp(o, "--csv")) {
      a->csv = 1;
    } else if (!strcmp(o, "--interleave")) {
      a->interleave = 1;
    } else if (!need(argc, argv, i)) {
      return -1;
    } else if (!strcmp(o, "-N")) {
      if (hvds_bench_parse_size(argv[++i], &a->n) != 0 || a->n == 0) return -1;
    } else if (!strcmp(o, "--density")) {
      a->density = atof(argv[++i]);
    } else if (!strcmp(o, "--row")) {
      a->row = (size_t)atol(argv[++i]);
    } else if (!strcmp(o, "--generator")) {
      int g = spx_gen_parse(argv[++i]);
      if (g < 0) return fprintf(stderr, "unknown generator '%s'\n", argv[i]), -1;
      a->gen = (spx_gen_t)g;
    } else if (!strcmp(o, "--overlap")) {
      a->overlap = atof(argv[++i]);
    } else if (!strcmp(o, "--algorithm")) {
      a->algorithm = argv[++i];
    } else if (!strcmp(o, "-d")) {
      if (perf_parse_dtype(argv[++i], &a->dtype) != 0) return -1;
    } else if (!strcmp(o, "--index")) {
      index_set = 1;
      a->index_dtype = !strcmp(argv[++i], "int64") ? HVDS_INT64 : HVDS_INT32;
    } else if (!strcmp(o, "-n")) {
      a->iters = atoi(argv[++i]);
    } else if (!strcmp(o, "-w")) {
      a->warmup = atoi(argv[++i]);
    } else if (!strcmp(o, "--min-time")) {
      a->min_time = atof(argv[++i]);
    } else if (!strcmp(o, "--quant-bits")) {
      a->quant_bits = atoi(argv[++i]);
    } else if (!strcmp(o, "--seed")) {
      a->seed = (uint64_t)atoll(argv[++i]);
    } else {
      fprintf(stderr, "unknown option '%s'\n", o);
      usage(stderr);
      return -1;
    }
  }
  if (!index_set && a->n >= ((size_t)1 << 31)) a->index_dtype = HVDS_INT64;
  if (a->row == 0 || a->iters < 1 || a->warmup < 0 || a->density < 0 || a->density > 1 ||
      !(a->min_time >= 0)) {
    fprintf(stderr, "bad --row, -n, -w, --density or --min-time\n");
    return -1;
  }
  return 0;
}

/* ---- data ---- */

/* Timed operations an algorithm may run. */
static int max_iters(const spx_args_t* a) {
  return a->min_time > 0 && a->iters < MIN_TIME_MAX_ITERS ? MIN_TIME_MAX_ITERS : a->iters;
}

static int make_data(const spx_args_t* a, spx_data_t* d) {
  size_t esz = hvds_dtype_size(a->dtype), isz = hvds_dtype_size(a->index_dtype);
  size_t want = (size_t)(a->density * (double)a->n + 0.5);
  int64_t* idx = spx_gen_indices(a->gen, a->n, want, a->overlap, a->seed, a->rank, a->np, &d->k);
  d->indices = malloc(d->k * isz + 1);
  d->values = malloc(d->k * a->row * esz + 1);
  d->dense = calloc(a->n * a->row, esz);
  d->ref = malloc(a->n * a->row * esz + 1);
  d->out = malloc(a->n * a->row * esz + 1);
  d->times = malloc(sizeof(double) * (size_t)(max_iters(a) + 1) * (NUM_ALGOS + 1));
  if (!idx || !d->indices || !d->values || !d->dense || !d->ref || !d->out || !d->times) {
    free(idx);
    return -1;
  }
  uint64_t rng = a->seed * 31 + (uint64_t)a->rank;
  for (size_t i = 0; i < d->k; i++) {
    if (a->index_dtype == HVDS_INT32)
      ((int32_t*)d->indices)[i] = (int32_t)idx[i];
    else
      ((int64_t*)d->indices)[i] = idx[i];
    for (size_t c = 0; c < a->row; c++) {
      double v = (double)(spx_rand(&rng) % 4 + 1);
      size_t at = (size_t)idx[i] * a->row + c;
      perf_set(d->values, a->dtype, i * a->row + c, v);
      perf_set(d->dense, a->dtype, at, perf_get(d->dense, a->dtype, at) + v);
    }
  }
  free(idx);
  return 0;
}

static void free_data(spx_data_t* d) {
  free(d->indices);
  free(d->values);
  free(d->dense);
  free(d->ref);
  free(d->out);
  free(d->times);
}

static hvds_tensor_t dense_view(const spx_args_t* a, void* data) {
  hvds_tensor_t t = {data, a->dtype, -1, a->row > 1 ? 2 : 1, {(int64_t)a->n, (int64_t)a->row}};
  return t;
}

/* ---- one algorithm ---- */

static hvds_result_t wait_release(hvds_handle_t h, int keep) {
  hvds_result_t rc = hvds_wait(h, WAIT_MS);
  if (rc != HVDS_SUCCESS) fprintf(stderr, "operation failed: %s\n", hvds_handle_error(h));
  if (!keep || rc != HVDS_SUCCESS) hvds_release(h);
  return rc;
}

/* Starts one sparse allreduce (algo NULL: the plain dense allreduce of this rank's data). */
static hvds_result_t start(const spx_args_t* a, spx_data_t* d, const char* algo, hvds_handle_t* h) {
  hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
  char name[96];
  snprintf(name, sizeof name, "spx.%s", algo ? algo : "plain");
  o.name = name;
  hvds_tensor_t out = dense_view(a, d->out);
  if (algo == NULL) {
    hvds_tensor_t in = dense_view(a, d->dense);
    o.sparse_detect = 0;
    return hvds_allreduce_async(&in, &out, &o, h);
  }
  o.sparse_algorithm = algo;
  o.sparse_quant_bits = a->quant_bits;
  hvds_sparse_tensor_t t = {a->row > 1 ? HVDS_SPARSE_ROWS : HVDS_SPARSE_COO,
                            d->indices,
                            a->index_dtype,
                            d->values,
                            a->dtype,
                            (int64_t)d->k,
                            a->row > 1 ? 2 : 1,
                            {(int64_t)a->n, (int64_t)a->row},
                            -1};
  return hvds_sparse_allreduce_async(&t, a->dense_out ? &out : NULL, &o, h);
}

/* How far a value may be from the reference: 0 (exact), or with quantized values the
 * quantizer's bound, the largest |value| over its levels per sign (ops/quantize.h). */
static double tolerance(const spx_args_t* a, const spx_data_t* d) {
  int levels = a->quant_bits == 2 ? 1 : a->quant_bits == 4 ? 7 : a->quant_bits == 8 ? 127 : 0;
  if (levels == 0) return 0;
  double largest = 0;
  for (size_t i = 0; i < a->n * a->row; i++) {
    double v = fabs(perf_get(d->ref, a->dtype, i));
    if (v > largest) largest = v;
  }
  return largest / levels * (1 + 1e-3);
}

static int differs(double got, double want, double tol) {
  return tol == 0 ? got != want : fabs(got - want) > tol;
}

/* Elements of the finished result h that differ from the reference (this rank). */
static long count_wrong(const spx_args_t* a, spx_data_t* d, hvds_handle_t h, int sparse) {
  size_t total = a->n * a->row;
  double tol = sparse ? tolerance(a, d) : 0;
  long wrong = 0;
  int64_t nnz = 0;
  const void *idx = NULL, *val = d->out;
  int32_t is_dense = 1;
  if (sparse && !a->dense_out &&
      hvds_handle_sparse_result(h, &nnz, &idx, &val, &is_dense, NULL) != HVDS_SUCCESS)
    return (long)total;
  if (is_dense) {
    for (size_t i = 0; i < total; i++)
      wrong += differs(perf_get(val, a->dtype, i), perf_get(d->ref, a->dtype, i), tol);
    return wrong;
  }
  size_t ref_rows = 0;  // rows of the reference with a non-zero: the union (values are > 0)
  for (size_t i = 0; i < a->n; i++)
    for (size_t c = 0; c < a->row; c++)
      if (perf_get(d->ref, a->dtype, i * a->row + c) != 0) {
        ref_rows++;
        break;
      }
  // Quantized values may round to zero rows or fill a range densely; no row may go missing.
  if (tol == 0 || (long)nnz < (long)ref_rows) wrong += labs((long)ref_rows - (long)nnz);
  for (int64_t e = 0; e < nnz; e++) {
    int64_t i = a->index_dtype == HVDS_INT32 ? ((const int32_t*)idx)[e] : ((const int64_t*)idx)[e];
    for (size_t c = 0; c < a->row; c++)
      wrong += i < 0 || (size_t)i >= a->n ||
               differs(perf_get(val, a->dtype, (size_t)e * a->row + c),
                       perf_get(d->ref, a->dtype, (size_t)i * a->row + c), tol);
  }
  return wrong;
}

/* Max over ranks of times[0..n) (per iteration) and the sum of *wrong. */
static int combine(double* times, int n, long* wrong) {
  hvds_tensor_t t = {times, HVDS_FLOAT64, -1, 1, {n}};
  int64_t w = *wrong;
  hvds_tensor_t tw = {&w, HVDS_INT64, -1, 1, {1}};
  hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
  hvds_handle_t h1, h2;
  o.name = "spx.stats.max";
  o.op = HVDS_MAX;
  if (hvds_allreduce_async(&t, &t, &o, &h1) != HVDS_SUCCESS) return -1;
  o.name = "spx.stats.sum";
  o.op = HVDS_SUM;
  if (hvds_allreduce_async(&tw, &tw, &o, &h2) != HVDS_SUCCESS) return -1;
  if (wait_release(h1, 0) != HVDS_SUCCESS || wait_release(h2, 0) != HVDS_SUCCESS) return -1;
  *wrong = (long)w;
  return 0;
}

static int barrier(void) {
  hvds_handle_t h;
  if (hvds_barrier_async(0, &h) != HVDS_SUCCESS) return -1;
  return wait_release(h, 0) == HVDS_SUCCESS ? 0 : -1;
}

/* n operations of algo, timed into times[0..n) (NULL: untimed). *h holds the last one's handle
 * (0: none; one it held before is released), or 0 after a failure. */
static int run_ops(const spx_args_t* a, spx_data_t* d, const char* algo, int n, double* times,
                   hvds_handle_t* h) {
  for (int i = 0; i < n; i++) {
    if (*h != 0) hvds_release(*h);
    *h = 0;
    double t0 = hvds_bench_now_us();
    if (start(a, d, algo, h) != HVDS_SUCCESS) {
      fprintf(stderr, "rank %d: %s: %s\n", a->rank, algo ? algo : "allreduce", hvds_last_error());
      *h = 0;
      return -1;
    }
    if (wait_release(*h, 1) != HVDS_SUCCESS) {
      *h = 0;
      return -1;
    }
    if (times != NULL) times[i] = (hvds_bench_now_us() - t0) / 1e3;
  }
  return 0;
}

/* Timed operations for an algorithm whose first -n took ms here in all: -n, or with --min-time
 * enough for that many seconds at the slowest rank's pace (agreed, so the count is the same
 * everywhere), up to MIN_TIME_MAX_ITERS. */
static int timed_iters(const spx_args_t* a, double ms, int* iters /* OUT */) {
  *iters = a->iters;
  if (a->min_time <= 0) return 0;
  hvds_tensor_t t = {&ms, HVDS_FLOAT64, -1, 1, {1}};
  hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
  hvds_handle_t h;
  o.name = "spx.stats.pace";
  o.op = HVDS_MAX;
  if (hvds_allreduce_async(&t, &t, &o, &h) != HVDS_SUCCESS || wait_release(h, 0) != HVDS_SUCCESS)
    return -1;
  double want = ms > 0 ? a->min_time * 1e3 / (ms / a->iters) : MIN_TIME_MAX_ITERS;
  if (want > *iters) *iters = want < MIN_TIME_MAX_ITERS ? (int)want + 1 : MIN_TIME_MAX_ITERS;
  return 0;
}

/* 1 when --algorithm (all, a name, or names separated by commas) asks for name. */
static int algo_asked(const char* asked, const char* name) {
  if (!strcmp(asked, "all")) return 1;
  size_t n = strlen(name);
  for (const char* at = asked; at != NULL; at = strchr(at, ','), at = at ? at + 1 : NULL)
    if (!strncmp(at, name, n) && (at[n] == ',' || at[n] == '\0')) return 1;
  return 0;
}

/* The first name in --algorithm that is no algorithm's (its length in *len), or NULL. */
static const char* unknown_algo(const char* asked, size_t* len) {
  if (!strcmp(asked, "all")) return NULL;
  for (const char* at = asked; at != NULL; at = strchr(at, ','), at = at ? at + 1 : NULL) {
    *len = strcspn(at, ",");
    int known = 0;
    for (int k = 0; k < NUM_ALGOS; k++)
      known |= strlen(kAlgos[k]) == *len && !strncmp(at, kAlgos[k], *len);
    if (!known) return at;
  }
  return NULL;
}

/* Runs algo (NULL: the plain dense allreduce) into times and fills row but for its times: the
 * warm-up, -n timed operations, then as many more as --min-time asks for (with --interleave,
 * row->iters says how many and run_interleaved runs them). */
static int run_algo(const spx_args_t* a, spx_data_t* d, const char* algo, double* times,
                    spx_row_t* row) {
  hvds_handle_t h = 0;
  double first = 0;
  int iters = a->iters;
  if (barrier() != 0 || run_ops(a, d, algo, a->warmup, NULL, &h) != 0 ||
      run_ops(a, d, algo, a->iters, times, &h) != 0)
    goto fail;
  for (int i = 0; i < a->iters; i++) first += times[i];
  if (timed_iters(a, first, &iters) != 0 ||
      (!a->interleave && run_ops(a, d, algo, iters - a->iters, times + a->iters, &h) != 0))
    goto fail;
  memset(row, 0, sizeof *row);
  row->algorithm = algo ? algo : "allreduce";
  row->ran = algo ? "?" : "plain dense";
  row->pick = "-";
  row->overlap = -1;
  row->iters = iters;
  row->model_ms = -1;
  row->result_nnz = -1;
  row->dense_result = 1;
  hvds_sparse_stats_t st;
  if (algo != NULL && hvds__handle_sparse_stats(h, &st) == HVDS_SUCCESS) {
    d->stats = st;
    d->have_stats = 1;
    row->ran = st.algorithm_name;
    row->pick = st.auto_name;
    row->overlap = st.overlap;
    row->model_ms = st.predicted_s * 1e3;
    row->max_nnz = st.max_nnz;
    row->total_nnz = st.total_nnz;
    row->result_nnz = st.result_nnz;
    row->model = st;
  }
  int64_t nnz = 0;
  int32_t is_dense = 1;
  if (algo != NULL && !a->dense_out)
    hvds_handle_sparse_result(h, &nnz, NULL, NULL, &is_dense, NULL);
  row->dense_result = is_dense;
  row->wrong = algo == NULL ? 0 : count_wrong(a, d, h, 1);
  hvds_release(h);
  return 0;
fail:
  if (h != 0) hvds_release(h);
  return -1;
}

/* Row r's per-operation times in d->times. */
static double* row_times(const spx_args_t* a, spx_data_t* d, int r) {
  return d->times + (size_t)r * (size_t)(max_iters(a) + 1);
}

/* --interleave: every algorithm's timed operations after its first -n, one of each in turn. */
static int run_interleaved(const spx_args_t* a, spx_data_t* d, const char* const* algos,
                           const spx_row_t* rows, int nrows) {
  for (int i = a->iters;; i++) {
    int ran = 0;
    for (int r = 0; r < nrows; r++) {
      if (i >= rows[r].iters) continue;
      hvds_handle_t h = 0;
      if (run_ops(a, d, algos[r], 1, row_times(a, d, r) + i, &h) != 0) return -1;
      hvds_release(h);
      ran = 1;
    }
    if (!ran) return 0;
  }
}

/* The row's time: per operation the slowest rank's, then the median and minimum. */
static int finish_row(const spx_args_t* a, spx_data_t* d, int r, spx_row_t* row) {
  double* times = row_times(a, d, r);
  if (combine(times, row->iters, &row->wrong) != 0) return -1;
  hvds_bench_stats(times, row->iters, &row->time_ms, &row->min_ms);
  return 0;
}

/* ---- output ---- */

static void print_header(const spx_args_t* a, const spx_data_t* d, const hvds_sparse_stats_t* st) {
  printf(
      "# hvdsparse-perf sparse_allreduce: np %d, N %zu x row %zu, density %g (%zu entries per "
      "rank), generator %s",
      a->np, a->n, a->row, a->density, d->k, spx_gen_name(a->gen));
  if (a->gen == SPX_OVERLAP) printf(" (overlap %g)", a->overlap);
  printf(", %s values, %s indices, %s results, iters %d, warmup %d", perf_dtype_label(a->dtype),
         a->index_dtype == HVDS_INT32 ? "int32" : "int64", a->dense_out ? "dense" : "sparse",
         a->iters, a->warmup);
  if (a->min_time > 0) printf(", min time %g s", a->min_time);
  printf("\n");
  if (st != NULL)
    printf(
        "# network (rank 0's, measured at init or set by the knobs): alpha %.2f us, %.3f GB/s; "
        "agreed unique entries: max %lld per rank, %lld in all\n",
        st->alpha * 1e6, 1e-9 / st->beta, (long long)st->max_nnz, (long long)st->total_nnz);
  printf(
      "# time = median (min) over iterations of the slowest rank's enqueue-to-done time; "
      "model = the cost model for the algorithm that ran; pick = the selector's choice; "
      "overlap = what the model was given, learned from the name's previous operation\n");
  if (a->csv) {
    printf(
        "algorithm,ran,np,n,row,density,generator,dtype,time_ms,min_ms,model_ms,pick,overlap,"
        "iters,max_nnz,total_nnz,result_nnz,dense_result,wrong,"
        "input_steps,imbalance,idx_bytes,val_bytes,quant_bits,pack_indices,dense_input,"
        "input_dense,"
        "alpha_s,beta_s,gamma_s,hash_s,qenc_s,qdec_s,round_s\n");
    return;
  }
  printf("#%24s %24s %10s %10s %10s %8s %24s %8s %6s %10s %6s %8s\n", "algorithm", "ran", "time_ms",
         "min_ms", "model_ms", "t/model", "pick", "overlap", "iters", "result_nnz", "dense",
         "#wrong");
}

static void print_row(const spx_args_t* a, const spx_row_t* r) {
  if (a->csv) {
    const hvds_sparse_stats_t* m = &r->model;  // zeros for the plain dense row
    printf(
        "%s,%s,%d,%zu,%zu,%g,%s,%s,%.4f,%.4f,%.4f,%s,%.4f,%d,%lld,%lld,%lld,%d,%ld,"
        "%.9g,%.6g,%g,%g,%d,%d,%d,%.9g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g\n",
        r->algorithm, r->ran, a->np, a->n, a->row, a->density, spx_gen_name(a->gen),
        perf_dtype_label(a->dtype), r->time_ms, r->min_ms, r->model_ms, r->pick, r->overlap,
        r->iters, r->max_nnz, r->total_nnz, r->result_nnz, r->dense_result, r->wrong,
        m->input_steps, m->imbalance, m->idx_bytes, m->val_bytes, m->quant_bits, m->pack_indices,
        m->dense_input, m->input_dense, m->alpha, m->beta, m->gamma, m->hash, m->qenc, m->qdec,
        m->round);
  } else {
    char ratio[16] = "-", model[16] = "-", overlap[16] = "-";
    if (r->model_ms > 0) {
      snprintf(ratio, sizeof ratio, "%.2f", r->time_ms / r->model_ms);
      snprintf(model, sizeof model, "%.3f", r->model_ms);
    }
    if (r->overlap >= 0) snprintf(overlap, sizeof overlap, "%.3f", r->overlap);
    printf(" %24s %24s %10.3f %10.3f %10s %8s %24s %8s %6d %10lld %6s %8ld\n", r->algorithm, r->ran,
           r->time_ms, r->min_ms, model, ratio, r->pick, overlap, r->iters, r->result_nnz,
           r->dense_result ? "yes" : "no", r->wrong);
  }
  fflush(stdout);
}

static void print_summary(const spx_row_t* rows, int n) {
  const spx_row_t *zen = NULL, *dense = NULL, *ag = NULL;
  long wrong = 0;
  for (int i = 0; i < n; i++) {
    if (!strcmp(rows[i].algorithm, "zen")) zen = &rows[i];
    if (!strcmp(rows[i].algorithm, "dense")) dense = &rows[i];
    if (!strcmp(rows[i].algorithm, "allgather")) ag = &rows[i];
    wrong += rows[i].wrong;
  }
  if (zen && dense && ag)
    printf("# zen: %.2fx faster than dense, %.2fx faster than allgather; measured/model %.2f\n",
           dense->time_ms / zen->time_ms, ag->time_ms / zen->time_ms,
           zen->model_ms > 0 ? zen->time_ms / zen->model_ms : 0);
  printf("# wrong elements against the dense allreduce: %ld %s\n", wrong, wrong ? "FAILED" : "OK");
}

int perf_sparse_main(int argc, char** argv) {
  spx_args_t a;
  int rc = parse(argc, argv, &a);
  if (rc != 0) return rc > 0 ? 0 : 2;
  size_t len = 0;
  const char* bad = unknown_algo(a.algorithm, &len);
  if (bad != NULL) {  // before init: every rank refuses alike
    fprintf(stderr, "unknown --algorithm '%.*s' (see --help)\n", (int)len, bad);
    return 2;
  }
  if (hvds_init() != HVDS_SUCCESS) {
    fprintf(stderr, "hvds_init failed: %s\n", hvds_last_error());
    return 1;
  }
  a.rank = hvds_rank();
  a.np = hvds_size();
  spx_data_t d = {0};
  spx_row_t rows[NUM_ALGOS + 1];
  const char* algos[NUM_ALGOS + 1] = {NULL}; /* NULL: the plain dense allreduce */
  int nrows = 0, failed = make_data(&a, &d) != 0;
  if (failed) fprintf(stderr, "rank %d: out of memory for the data\n", a.rank);
  // The reference: the plain dense allreduce, also the first row.
  if (!failed) failed = run_algo(&a, &d, NULL, row_times(&a, &d, nrows), &rows[nrows]) != 0;
  if (!failed) memcpy(d.ref, d.out, a.n * a.row * hvds_dtype_size(a.dtype));
  nrows += !failed;
  for (int k = 0; k < NUM_ALGOS && !failed; k++) {
    if (!algo_asked(a.algorithm, kAlgos[k])) continue;
    algos[nrows] = kAlgos[k];
    failed = run_algo(&a, &d, kAlgos[k], row_times(&a, &d, nrows), &rows[nrows]) != 0;
    nrows += !failed;
  }
  if (!failed && a.interleave) failed = run_interleaved(&a, &d, algos, rows, nrows) != 0;
  for (int r = 0; r < nrows && !failed; r++) failed = finish_row(&a, &d, r, &rows[r]) != 0;
  if (!failed && nrows == 1) {
    if (a.rank == 0) fprintf(stderr, "unknown --algorithm '%s'\n", a.algorithm);
    failed = 1;
  }
  if (a.rank == 0 && !failed) {
    print_header(&a, &d, d.have_stats ? &d.stats : NULL);
    for (int i = 0; i < nrows; i++) print_row(&a, &rows[i]);
    print_summary(rows, nrows);
  }
  free_data(&d);
  hvds_shutdown();
  long wrong = 0;
  for (int i = 0; i < nrows; i++) wrong += rows[i].wrong;
  if (failed && a.rank == 0) fprintf(stderr, "hvdsparse-perf: a collective failed; see above\n");
  return failed || wrong > 0 ? 1 : 0;
}
