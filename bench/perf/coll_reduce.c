/* The reducing collectives under test: allreduce and reducescatter. */
#include <math.h>
#include <stdlib.h>

#include "perf.h"

static hvds_tensor_t tensor_1d(void* data, hvds_dtype_t dt, size_t n) {
  hvds_tensor_t t = {data, dt, -1, 1, {(int64_t)n}};
  return t;
}

static hvds_op_options_t options(const perf_case_t* c) {
  hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
  o.name = c->name;
  o.op = c->a->op;
  return o;
}

static void fill_input(perf_case_t* c) {
  perf_fill(c->in, c->a->dtype, c->count, c->a->op, c->a->rank, 0);
}

static void free_buffers(perf_case_t* c) {
  free(c->in);
  free(c->out);
  c->in = c->out = NULL;
}

/* ---- allreduce: count elements on every rank, in place unless --oop ---- */

static size_t allreduce_count(size_t bytes, size_t esz, int np) { return bytes / esz; }

static int allreduce_setup(perf_case_t* c) {
  c->in = malloc(c->count * c->esz + 1);
  c->out = c->a->inplace ? NULL : malloc(c->count * c->esz + 1);
  if (c->in == NULL || (!c->a->inplace && c->out == NULL)) return -1;
  fill_input(c);
  return 0;
}

static hvds_result_t allreduce_start(perf_case_t* c, hvds_handle_t* h) {
  hvds_tensor_t in = tensor_1d(c->in, c->a->dtype, c->count);
  hvds_tensor_t out = tensor_1d(c->a->inplace ? c->in : c->out, c->a->dtype, c->count);
  hvds_op_options_t o = options(c);
  return hvds_allreduce_async(&in, &out, &o, h);
}

// In place, every timed iteration reduced the previous result again.
static void allreduce_refill(perf_case_t* c) {
  if (c->a->inplace) fill_input(c);
}

static long allreduce_check(perf_case_t* c, hvds_handle_t h, double* max_err) {
  const perf_args_t* a = c->a;
  double ref[11];
  perf_reduce_ref(a->op, a->dtype, a->np, ref);
  const void* res = a->inplace ? c->in : c->out;
  long wrong = 0;
  *max_err = 0;
  for (size_t i = 0; i < c->count; i++) {
    double want = ref[i % 11];
    perf_compare(perf_get(res, a->dtype, i), want, perf_tolerance(a->op, a->dtype, want), &wrong,
                 max_err);
  }
  return wrong;
}

const perf_coll_t perf_allreduce = {"allreduce",     1,
                                    allreduce_count, allreduce_setup,
                                    allreduce_start, allreduce_refill,
                                    allreduce_check, free_buffers};

/* ---- reducescatter: count elements in, count/np out (equal shares) ---- */

static size_t scatter_count(size_t bytes, size_t esz, int np) {
  return bytes / esz / (size_t)np * (size_t)np;
}

static int scatter_setup(perf_case_t* c) {
  c->in = malloc(c->count * c->esz + 1);
  if (c->in == NULL) return -1;
  fill_input(c);
  return 0;
}

static hvds_result_t scatter_start(perf_case_t* c, hvds_handle_t* h) {
  hvds_tensor_t in = tensor_1d(c->in, c->a->dtype, c->count);
  hvds_op_options_t o = options(c);
  return hvds_reducescatter_async(&in, &o, h);
}

static long scatter_check(perf_case_t* c, hvds_handle_t h, double* max_err) {
  const perf_args_t* a = c->a;
  *max_err = 0;
  hvds_tensor_t out;
  size_t share = c->count / (size_t)a->np;
  if (hvds_handle_output(h, 0, &out) != HVDS_SUCCESS || out.ndim != 1 ||
      out.shape[0] != (int64_t)share) {
    *max_err = INFINITY;
    return (long)share + 1;  // the output itself is wrong
  }
  double ref[11];
  perf_reduce_ref(a->op, a->dtype, a->np, ref);
  long wrong = 0;
  size_t first = share * (size_t)a->rank;
  for (size_t j = 0; j < share; j++) {
    double want = ref[(first + j) % 11];
    perf_compare(perf_get(out.data, a->dtype, j), want, perf_tolerance(a->op, a->dtype, want),
                 &wrong, max_err);
  }
  return wrong;
}

const perf_coll_t perf_reducescatter = {"reducescatter", 1,    scatter_count, scatter_setup,
                                        scatter_start,   NULL, scatter_check, free_buffers};
