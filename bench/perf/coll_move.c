/* The data-moving collectives under test: allgather, broadcast and alltoall. */
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
  return o;
}

static void free_buffers(perf_case_t* c) {
  free(c->in);
  free(c->out);
  c->in = c->out = NULL;
}

static size_t equal_shares(size_t bytes, size_t esz, int np) {
  return bytes / esz / (size_t)np * (size_t)np;
}

// Output 0 of h, which must be a 1-d tensor of n elements; NULL otherwise.
static const void* output_of(hvds_handle_t h, size_t n) {
  hvds_tensor_t out;
  if (hvds_handle_output(h, 0, &out) != HVDS_SUCCESS || out.ndim != 1 || out.shape[0] != (int64_t)n)
    return NULL;
  return out.data;
}

/* ---- allgather: each rank contributes count/np elements; the output holds count ---- */

static int allgather_setup(perf_case_t* c) {
  size_t share = c->count / (size_t)c->a->np;
  c->in = malloc(share * c->esz + 1);
  if (c->in == NULL) return -1;
  perf_fill(c->in, c->a->dtype, share, HVDS_SUM, c->a->rank, 0);
  return 0;
}

static hvds_result_t allgather_start(perf_case_t* c, hvds_handle_t* h) {
  hvds_tensor_t in = tensor_1d(c->in, c->a->dtype, c->count / (size_t)c->a->np);
  hvds_op_options_t o = options(c);
  return hvds_allgather_async(&in, &o, h);
}

static long allgather_check(perf_case_t* c, hvds_handle_t h, double* max_err) {
  const perf_args_t* a = c->a;
  const void* out = output_of(h, c->count);
  *max_err = 0;
  if (out == NULL) {
    *max_err = INFINITY;
    return (long)c->count + 1;
  }
  size_t share = c->count / (size_t)a->np;
  long wrong = 0;
  for (int r = 0; r < a->np; r++)
    for (size_t j = 0; j < share; j++)
      perf_compare(perf_get(out, a->dtype, (size_t)r * share + j), perf_value(HVDS_SUM, r, j), 0,
                   &wrong, max_err);
  return wrong;
}

const perf_coll_t perf_allgather = {"allgather",     0,    equal_shares,    allgather_setup,
                                    allgather_start, NULL, allgather_check, free_buffers};

/* ---- broadcast: count elements, in place, from -r root ---- */

static size_t broadcast_count(size_t bytes, size_t esz, int np) { return bytes / esz; }

// The root holds its pattern; the others hold a marker that the broadcast must overwrite.
static void broadcast_refill(perf_case_t* c) {
  const perf_args_t* a = c->a;
  if (a->rank == a->root) {
    perf_fill(c->in, a->dtype, c->count, HVDS_SUM, a->rank, 0);
  } else {
    for (size_t i = 0; i < c->count; i++) perf_set(c->in, a->dtype, i, 99);
  }
}

static int broadcast_setup(perf_case_t* c) {
  c->in = malloc(c->count * c->esz + 1);
  if (c->in == NULL) return -1;
  broadcast_refill(c);
  return 0;
}

static hvds_result_t broadcast_start(perf_case_t* c, hvds_handle_t* h) {
  hvds_tensor_t t = tensor_1d(c->in, c->a->dtype, c->count);
  hvds_op_options_t o = options(c);
  o.root_rank = c->a->root;
  return hvds_broadcast_async(&t, &o, h);
}

static long broadcast_check(perf_case_t* c, hvds_handle_t h, double* max_err) {
  const perf_args_t* a = c->a;
  long wrong = 0;
  *max_err = 0;
  for (size_t i = 0; i < c->count; i++)
    perf_compare(perf_get(c->in, a->dtype, i), perf_value(HVDS_SUM, a->root, i), 0, &wrong,
                 max_err);
  return wrong;
}

const perf_coll_t perf_broadcast = {"broadcast",     0,
                                    broadcast_count, broadcast_setup,
                                    broadcast_start, broadcast_refill,
                                    broadcast_check, free_buffers};

/* ---- alltoall: each rank sends count/np elements to every rank (equal splits) ---- */

static int alltoall_setup(perf_case_t* c) {
  c->in = malloc(c->count * c->esz + 1);
  if (c->in == NULL) return -1;
  perf_fill(c->in, c->a->dtype, c->count, HVDS_SUM, c->a->rank, 0);
  return 0;
}

static hvds_result_t alltoall_start(perf_case_t* c, hvds_handle_t* h) {
  hvds_tensor_t in = tensor_1d(c->in, c->a->dtype, c->count);
  hvds_op_options_t o = options(c);
  return hvds_alltoall_async(&in, &o, h);
}

// Block r of the output is rank r's input elements [rank * share, (rank + 1) * share).
static long alltoall_check(perf_case_t* c, hvds_handle_t h, double* max_err) {
  const perf_args_t* a = c->a;
  const void* out = output_of(h, c->count);
  *max_err = 0;
  if (out == NULL) {
    *max_err = INFINITY;
    return (long)c->count + 1;
  }
  size_t share = c->count / (size_t)a->np, mine = share * (size_t)a->rank;
  long wrong = 0;
  for (int r = 0; r < a->np; r++)
    for (size_t j = 0; j < share; j++)
      perf_compare(perf_get(out, a->dtype, (size_t)r * share + j),
                   perf_value(HVDS_SUM, r, mine + j), 0, &wrong, max_err);
  return wrong;
}

const perf_coll_t perf_alltoall = {"alltoall",     0,    equal_shares,   alltoall_setup,
                                   alltoall_start, NULL, alltoall_check, free_buffers};
