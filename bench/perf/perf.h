/* hvdsparse-perf: internal interfaces. main.c drives the size sweep; each collective is a
 * perf_coll_t (coll_reduce.c, coll_move.c) that sets up buffers, enqueues one operation and checks
 * its result; dtype.c holds element access and the reference values. */
#ifndef HVDS_PERF_H_
#define HVDS_PERF_H_

#include <stddef.h>

#include "bench_util.h"
#include "hvdsparse.h"

/* Everything the command line sets. */
typedef struct {
  hvds_bench_sweep_t sweep;
  const char* coll;    /* subcommand: allreduce, allgather, broadcast, alltoall, reducescatter */
  hvds_dtype_t dtype;  /* -d */
  hvds_reduce_op_t op; /* -o: allreduce and reducescatter */
  int inplace;         /* allreduce: output aliases input (default); --oop turns it off */
  int root;            /* -r: broadcast root */
  const char* times;   /* --times: rank 0 writes every timed iteration's time here, in order */
  int pause_ms;        /* --pause: idle time before each size's middle timed iteration */
  int rank, np;        /* filled after hvds_init() */
} perf_args_t;

/* One size of the sweep. The collective owns in/out and frees them in teardown. */
typedef struct {
  const perf_args_t* a;
  size_t count;  /* elements of the row's nominal buffer (see perf_coll_t.count_for) */
  size_t esz;    /* bytes per element */
  char name[64]; /* the tensor name, reused by every iteration of this size */
  void* in;
  void* out;
} perf_case_t;

/* A collective under test. */
typedef struct {
  const char* name;
  int reduces; /* takes -o */
  /* Elements of the row's buffer for a size in bytes: rounded down so every rank gets equal
   * shares. The buffer is the allreduce/broadcast tensor, the allgather output, the reducescatter
   * input, the alltoall send buffer of one rank. */
  size_t (*count_for)(size_t bytes, size_t esz, int np);
  int (*setup)(perf_case_t* c);                             /* 0, or -1 when out of memory */
  hvds_result_t (*start)(perf_case_t* c, hvds_handle_t* h); /* enqueue one operation */
  /* Before the checked operation: restore inputs an in-place operation overwrote. May be NULL. */
  void (*refill)(perf_case_t* c);
  /* Counts wrong elements of the finished operation h (handle outputs still held). */
  long (*check)(perf_case_t* c, hvds_handle_t h, double* max_err /* OUT */);
  void (*teardown)(perf_case_t* c);
} perf_coll_t;

extern const perf_coll_t perf_allreduce, perf_reducescatter;            /* coll_reduce.c */
extern const perf_coll_t perf_allgather, perf_broadcast, perf_alltoall; /* coll_move.c */

/* sparse_allreduce.c: the sparse_allreduce subcommand, with its own options (argv[0] is
 * "sparse_allreduce"). Returns the process exit code. */
int perf_sparse_main(int argc, char** argv);

/* args.c: parses argv into *a; returns 0, 1 after printing help, or -1 after printing an error. */
int perf_parse_args(int argc, char** argv, perf_args_t* a /* OUT */);
const perf_coll_t* perf_find_coll(const char* name);

/* dtype.c */
int perf_parse_dtype(const char* text, hvds_dtype_t* out /* OUT */);
const char* perf_dtype_label(hvds_dtype_t dt);
int perf_parse_op(const char* text, hvds_reduce_op_t* out /* OUT */);
const char* perf_op_label(hvds_reduce_op_t op);
void perf_set(void* p, hvds_dtype_t dt, size_t i, double v);
double perf_get(const void* p, hvds_dtype_t dt, size_t i);
/* Rank r's input element i for op (1..11, or 1..2 for product so products stay exact). */
double perf_value(hvds_reduce_op_t op, int r, size_t i);
/* Fills p[0..n) with rank r's values for elements first..first+n. */
void perf_fill(void* p, hvds_dtype_t dt, size_t n, hvds_reduce_op_t op, int r, size_t first);
/* The reduction of element i over np ranks; the pattern has period 11, so ref[11] holds all. */
void perf_reduce_ref(hvds_reduce_op_t op, hvds_dtype_t dt, int np, double ref[11] /* OUT */);
/* Largest acceptable |got - want| (0 except for averages). */
double perf_tolerance(hvds_reduce_op_t op, hvds_dtype_t dt, double want);

/* Accumulates one compared element into *wrong and *max_err. */
static inline void perf_compare(double got, double want, double tol, long* wrong, double* max_err) {
  double err = got > want ? got - want : want - got;
  if (!(err <= tol)) (*wrong)++;
  if (!(err <= *max_err)) *max_err = err;
}

#endif /* HVDS_PERF_H_ */
