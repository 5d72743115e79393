/* The sparse allreduce entry point (sparse_allreduce.h): normalize, agree, select, run, finish.
 *
 * The preamble is the only place ranks learn about each other's inputs before data moves: one
 * halving-doubling allreduce of SLOTS int64 per rank (each rank fills its own slots, zeros
 * elsewhere). From it every rank derives the same verdict (signature mismatch, then the first
 * rank with a bad input, in rank order) and the same message, and the selector sees the same
 * entry counts (and rank 0's overlap estimate) everywhere, so every rank runs the same algorithm
 * or fails the same way.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "quantize.h"
#include "reduce.h"
#include "sparse_internal.h"

/* Preamble slots per rank. S_SEED, S_OVERLAP and S_CALIB.. count only on rank 0: its ZEN key,
 * overlap estimate and cost corrections (the doubles' bits) become everyone's, so every rank's
 * selector sees the same. */
enum {
  S_NNZ,
  S_STATUS,
  S_INDEX,
  S_POSITION,
  S_SIGNATURE,
  S_INPUT,       /* entry steps of bringing its input into order (the largest is priced) */
  S_INPUT_DENSE, /* the same for the dense baseline (sparse_input.h: it may skip the order) */
  S_IMBALANCE,   /* its entries' index-range imbalance (a double's bits; the largest is priced) */
  S_SEED,
  S_OVERLAP,
  S_CALIB,
  SLOTS = S_CALIB + HVDS_SPARSE_ALGO_COUNT
};

#define DEFAULT_ZEN_SEED 0x5a454e2d53454544ULL /* "ZEN-SEED" */

/* FNV-1a over what every rank must pass identically. */
static uint64_t signature(const hvds_sparse_layout_t* lay, hvds_reduce_op_t op,
                          hvds_sparse_algo_t algo, int quant_bits, int pack_indices) {
  uint64_t f[8] = {
      lay->dim,     lay->row,       (uint64_t)lay->dtype, (uint64_t)lay->index_dtype,
      (uint64_t)op, (uint64_t)algo, (uint64_t)quant_bits, (uint64_t)(int64_t)pack_indices};
  uint64_t h = 0xcbf29ce484222325ULL;
  for (int i = 0; i < 8; i++)
    for (int b = 0; b < 8; b++) h = (h ^ ((f[i] >> (8 * b)) & 0xff)) * 0x100000001b3ULL;
  return h >> 1;  // stays a positive int64 through the allreduce
}

static int sum_op(hvds_reduce_op_t op) { return op == HVDS_SUM || op == HVDS_AVERAGE; }

/* The quantization width that applies: o->quant_bits for floating-point values on more than one
 * rank, else 0 (integers stay exact; one rank moves nothing). */
static int quant_width(const hvds_p2p_t* p, const hvds_sparse_layout_t* lay,
                       const hvds_sparse_opts_t* o) {
  return p->size > 1 && hvds__quant_dtype_ok(lay->dtype) ? o->quant_bits : 0;
}

/* Checks of arguments that are identical on every rank, so they fail everywhere alike. */
static hvds_result_t check_call(hvds_p2p_t* p, const hvds_sparse_layout_t* lay, hvds_reduce_op_t op,
                                const hvds_sparse_opts_t* o) {
  hvds_result_t rc = hvds__sparse_layout_check(lay, p->error, sizeof p->error);
  if (rc != HVDS_SUCCESS) return rc;
  if (op != HVDS_SUM && op != HVDS_AVERAGE && op != HVDS_MIN && op != HVDS_MAX &&
      op != HVDS_PRODUCT) {
    snprintf(p->error, sizeof p->error, "sparse allreduce: reduce op %d is not supported", (int)op);
    return HVDS_NOT_SUPPORTED;
  }
  rc = hvds__coll_check(p, lay->dtype, op);
  if (rc != HVDS_SUCCESS) return rc;
  if (o->quant_bits != 0 && hvds__quant_levels(o->quant_bits) == 0) {
    snprintf(p->error, sizeof p->error,
             "sparse allreduce: quant_bits %d is not supported (0, 2, 4 or 8)", o->quant_bits);
    return HVDS_INVALID_ARGUMENT;
  }
  if (o->algorithm == HVDS_SPARSE_AUTO) return HVDS_SUCCESS;
  const hvds_sparse_algo_info_t* info = hvds__sparse_algo_info(o->algorithm);
  if (info == NULL) {
    snprintf(p->error, sizeof p->error, "sparse allreduce: unknown algorithm %d",
             (int)o->algorithm);
    return HVDS_INVALID_ARGUMENT;
  }
  if (!info->any_op && !sum_op(op)) {
    snprintf(p->error, sizeof p->error,
             "sparse allreduce: %s supports only Sum and Average (reduce op %d); use dense",
             info->name, (int)op);
    return HVDS_NOT_SUPPORTED;
  }
  return HVDS_SUCCESS;
}

/* The verdict on the agreed slots: the first disagreement or bad input, in rank order. */
static hvds_result_t verdict(hvds_sparse_ctx_t* c, const uint64_t* all) {
  hvds_p2p_t* p = c->p;
  for (int r = 1; r < p->size; r++) {
    if (all[r * SLOTS + S_SIGNATURE] != all[S_SIGNATURE]) {
      snprintf(p->error, sizeof p->error,
               "sparse allreduce: rank %d passed a different layout, reduce op, algorithm, "
               "quant_bits or pack_indices than rank 0",
               r);
      return HVDS_PRECONDITION_ERROR;
    }
  }
  for (int r = 0; r < p->size; r++) {
    const uint64_t* s = all + (size_t)r * SLOTS;
    switch ((hvds_sparse_input_status_t)s[S_STATUS]) {
      case HVDS_SPARSE_INPUT_OK:
        continue;
      case HVDS_SPARSE_INPUT_BAD_INDEX:
        snprintf(p->error, sizeof p->error,
                 "sparse allreduce: index %lld (position %llu) on rank %d is outside the dense "
                 "shape [0, %zu)",
                 (long long)s[S_INDEX], (unsigned long long)s[S_POSITION], r, c->lay.dim);
        return HVDS_INVALID_ARGUMENT;
      case HVDS_SPARSE_INPUT_NULL:
        snprintf(p->error, sizeof p->error,
                 "sparse allreduce: rank %d passed entries with a NULL indices or values pointer",
                 r);
        return HVDS_INVALID_ARGUMENT;
      default:
        snprintf(p->error, sizeof p->error,
                 "sparse allreduce: rank %d ran out of memory preparing its input", r);
        return HVDS_SYSTEM_ERROR;
    }
  }
  return HVDS_SUCCESS;
}

/* Exchanges the slots and records the agreed entry counts, ZEN key and overlap. */
static hvds_result_t preamble(hvds_sparse_ctx_t* c, const hvds_sparse_input_t* in, uint64_t sig,
                              const hvds_sparse_opts_t* o, uint64_t* all) {
  const hvds_sparse_input_check_t* chk = &in->chk;
  uint64_t w, imb;
  memcpy(&w, &o->overlap, sizeof w);
  memcpy(&imb, &in->imbalance, sizeof imb);
  uint64_t mine[SLOTS] = {[S_NNZ] = in->entries,
                          [S_STATUS] = (uint64_t)chk->status,
                          [S_INDEX] = (uint64_t)chk->index,
                          [S_POSITION] = chk->position,
                          [S_SIGNATURE] = sig,
                          [S_INPUT] = (uint64_t)chk->steps,
                          [S_INPUT_DENSE] = (uint64_t)in->scatter_steps,
                          [S_IMBALANCE] = imb,
                          [S_SEED] = c->zen_seed,
                          [S_OVERLAP] = w};
  memcpy(&mine[S_CALIB], o->calib, sizeof o->calib);
  hvds_result_t rc = hvds__sparse_allgather_u64(c, mine, SLOTS, all);
  if (rc != HVDS_SUCCESS) return rc;
  rc = verdict(c, all);
  if (rc != HVDS_SUCCESS) return rc;
  c->zen_seed = all[S_SEED];  // rank 0's
  memcpy(&c->res->overlap, &all[S_OVERLAP], sizeof(double));
  if (!(c->res->overlap >= 0)) c->res->overlap = -1.0;  // negative or NaN: unknown
  memcpy(c->res->calib, &all[S_CALIB], sizeof c->res->calib);
  for (int a = 0; a < HVDS_SPARSE_ALGO_COUNT; a++)
    if (!(c->res->calib[a] > 0)) c->res->calib[a] = 0;  // negative or NaN: none
  uint64_t* nnz = all;  // compacted in place: nnz[r] = all[r * SLOTS + S_NNZ]
  for (int r = 0; r < c->p->size; r++) {
    if (all[r * SLOTS + S_INPUT] > c->res->input_steps)
      c->res->input_steps = all[r * SLOTS + S_INPUT];
    if (all[r * SLOTS + S_INPUT_DENSE] > c->res->input_dense_steps)
      c->res->input_dense_steps = all[r * SLOTS + S_INPUT_DENSE];
    double b;
    memcpy(&b, &all[r * SLOTS + S_IMBALANCE], sizeof b);
    if (b > c->res->imbalance) c->res->imbalance = b;  // NaN never wins
    nnz[r] = all[r * SLOTS + S_NNZ];
    if (nnz[r] > c->res->max_nnz) c->res->max_nnz = nnz[r];
    c->res->total_nnz += nnz[r];
  }
  c->nnz = nnz;
  return HVDS_SUCCESS;
}

/* The call as the cost model sees it, from the agreed counts and overlap. */
static hvds_sparse_problem_t problem(const hvds_sparse_ctx_t* c) {
  hvds_sparse_problem_t x = {c->p->size,
                             (double)c->lay.dim,
                             (double)c->lay.row,
                             (double)hvds__dtype_bytes(c->lay.dtype),
                             (double)hvds__sparse_idx_bytes(&c->lay),
                             (double)c->res->max_nnz,
                             c->res->overlap,
                             c->quant_bits,
                             (double)c->res->input_steps,
                             c->res->imbalance,
                             0,  // choose() sets the caller's pack_indices
                             0,  // entries, not a dense tensor
                             (double)c->res->input_dense_steps};
  return x;
}

/* The forced algorithm, else the cost model's choice for the agreed counts. The dense baseline
 * runs the dense algorithm the model priced, and the gathers go packed as it priced them, so
 * prediction and run agree. */
static hvds_sparse_algo_t choose(hvds_sparse_ctx_t* c, const hvds_sparse_opts_t* o) {
  hvds_sparse_problem_t x = problem(c);
  x.pack_indices = o->pack_indices;
  hvds_sparse_algo_t a = o->algorithm != HVDS_SPARSE_AUTO ? o->algorithm
                         : !sum_op(c->op)
                             ? HVDS_SPARSE_DENSE
                             : hvds__sparse_select_calibrated(&x, &o->net, c->res->calib, NULL);
  if (a == HVDS_SPARSE_DENSE)
    c->coll.algorithm = hvds__sparse_dense_rhd(&x, &o->net) ? HVDS_ALGO_RHD : HVDS_ALGO_RING;
  c->packed = c->p->size > 1 && hvds__sparse_packs(a, &x, &o->net);
  return a;
}

/* The caller's dense output, when an algorithm may build a dense result in it: it overlaps
 * neither the input's indices nor its values. */
static void* dense_target(const hvds_sparse_layout_t* lay, const void* indices, const void* values,
                          size_t nnz, void* dense_out) {
  if (dense_out == NULL) return NULL;
  uintptr_t d = (uintptr_t)dense_out, d_end = d + lay->dim * hvds__sparse_row_bytes(lay);
  uintptr_t in[2] = {(uintptr_t)indices, (uintptr_t)values};
  size_t in_bytes[2] = {nnz * hvds__sparse_idx_bytes(lay), nnz * hvds__sparse_row_bytes(lay)};
  for (int k = 0; k < 2; k++)
    if (in[k] != 0 && in_bytes[k] > 0 && in[k] < d_end && d < in[k] + in_bytes[k]) return NULL;
  return dense_out;
}

/* Average, then the result in the form the caller asked for. Consumes out. */
static hvds_result_t finish(hvds_sparse_ctx_t* c, hvds_sstream_t* out) {
  const hvds_sparse_layout_t* lay = &c->lay;
  hvds_sparse_result_t* res = c->res;
  int in_place = out->base != NULL && out->base == res->dense_out;  // built in the output
  if (!in_place && hvds__sstream_own(lay, out) != HVDS_SUCCESS)
    return hvds__sparse_nomem(c, "sparse allreduce");
  // Before Average (integers may truncate to 0) and before quantization (values may round to 0).
  res->union_nnz = c->union_rows >= 0 ? (size_t)c->union_rows : hvds__sstream_nonzero(lay, out);
  if (c->op == HVDS_AVERAGE && c->p->size > 1 && out->n > 0)
    hvds__divide(hvds__sstream_val(lay, out), out->n * lay->row, lay->dtype, c->p->size);
  if (res->dense_out != NULL) {
    if (lay->dim > 0 && !in_place) hvds__sstream_to_dense(lay, out, res->dense_out);
    hvds__sstream_free(out);
    return HVDS_SUCCESS;
  }
  res->is_dense = out->dense;
  res->nnz = out->n;
  res->indices = out->dense ? NULL : out->base;
  res->values = hvds__sstream_val(lay, out);
  res->owned = out->owned;
  *out = (hvds_sstream_t){0, lay->dim, 0, 0, NULL, NULL};
  return HVDS_SUCCESS;
}

hvds_result_t hvds__sparse_allreduce(hvds_p2p_t* p, const hvds_sparse_layout_t* lay,
                                     const void* indices, const void* values, size_t nnz,
                                     hvds_reduce_op_t op, const hvds_sparse_opts_t* o,
                                     hvds_sparse_result_t* res) {
  static const hvds_sparse_opts_t defaults = HVDS_SPARSE_OPTS_INIT;
  if (o == NULL) o = &defaults;
  *res = (hvds_sparse_result_t){.dense_out = res->dense_out, .overlap = -1.0};
  hvds_result_t rc = check_call(p, lay, op, o);
  if (rc != HVDS_SUCCESS) return rc;
  hvds_sparse_ctx_t c = {.p = p,
                         .lay = *lay,
                         .op = op,
                         .tag = o->tag,
                         .coll = {o->tag, HVDS_ALGO_AUTO, o->chunk_bytes, 0},
                         .zen_seed = o->zen_seed != 0 ? o->zen_seed : DEFAULT_ZEN_SEED,
                         .res = res,
                         .quant_bits = quant_width(p, lay, o),
                         .union_rows = -1,
                         .dense_target = dense_target(lay, indices, values, nnz, res->dense_out)};
  hvds_sparse_input_t in;
  hvds_sstream_t out = {0, lay->dim, 0, 0, NULL, NULL};
  // Judged in the preamble. Its ordering may wait for the choice: the dense baseline needs none.
  int may_defer = o->algorithm == HVDS_SPARSE_AUTO || o->algorithm == HVDS_SPARSE_DENSE;
  hvds__sparse_input_take(lay, indices, values, nnz, p->size, may_defer, &in);
  uint64_t* all = malloc((size_t)p->size * SLOTS * sizeof(uint64_t));
  uint64_t sig = signature(lay, op, o->algorithm, o->quant_bits, o->pack_indices);
  rc = all != NULL ? preamble(&c, &in, sig, o, all) : hvds__sparse_nomem(&c, "sparse allreduce");
  if (rc == HVDS_SUCCESS) {
    res->algorithm = choose(&c, o);
    if (res->algorithm == HVDS_SPARSE_DENSE && in.deferred)
      c.unordered = &in;
    else
      hvds__sparse_input_order(&in);
    HVDS_DEBUG(
        "sparse allreduce: %s on %d ranks, dim %zu x %zu, entries max %zu total %zu, overlap %g, "
        "index-range imbalance %.2f, input steps %zu%s%s",
        hvds__sparse_algo_name(res->algorithm), p->size, lay->dim, lay->row, res->max_nnz,
        res->total_nnz, res->overlap, res->imbalance, res->input_steps,
        c.unordered ? " (entries added in unsorted)" : "",
        c.packed ? ", packed (indices delta-coded)" : "");
    rc = hvds__sparse_algo_info(res->algorithm)->run(&c, &in.stream, &out);
  }
  if (rc == HVDS_SUCCESS) rc = finish(&c, &out);
  hvds__sparse_input_free(&in);
  hvds__sstream_free(&out);
  free(all);
  return rc;
}

void hvds__sparse_result_free(hvds_sparse_result_t* res) {
  free(res->owned);
  res->owned = res->indices = res->values = NULL;
  res->nnz = 0;
  res->is_dense = 0;
}
