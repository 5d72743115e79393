/* Baseline: scatter the sparse input into a dense tensor and run the dense allreduce.
 *
 * Algorithm: every rank writes its stream into a zero-filled dim * row buffer, then
 * hvds__allreduce (halving-doubling or ring, chosen by size) reduces it with the caller's op.
 * Cost: the dense allreduce on N * row values whatever the density, plus O(N) local work. An
 * unsorted input is added in as it comes (c->unordered), without the sort the others need.
 * Preconditions: none beyond the layout; the only algorithm that supports Min, Max and Product
 * (absent entries count as zeros of the dense tensor). The result is always dense; with a dense
 * output from the caller it is built there (no buffer of its own, no copy after).
 */
#include "sparse_internal.h"

hvds_result_t hvds__sparse_run_dense(hvds_sparse_ctx_t* c, hvds_sstream_t* in,
                                     hvds_sstream_t* out) {
  const hvds_sparse_layout_t* lay = &c->lay;
  if (c->dense_target != NULL && lay->dim > 0)
    *out = (hvds_sstream_t){0, lay->dim, lay->dim, 1, c->dense_target, NULL};
  else if (hvds__sstream_alloc(lay, 0, lay->dim, lay->dim, lay->dim > 0, out) != HVDS_SUCCESS)
    return hvds__sparse_nomem(c, "sparse dense allreduce");
  if (lay->dim == 0) return HVDS_SUCCESS;
  if (c->unordered != NULL)
    hvds__sparse_input_to_dense(c->unordered, out->base);
  else
    hvds__sstream_to_dense(lay, in, out->base);
  hvds_reduce_op_t op = c->op == HVDS_AVERAGE ? HVDS_SUM : c->op;
  hvds_result_t rc =
      hvds__allreduce(c->p, out->base, lay->dim * lay->row, lay->dtype, op, &c->coll);
  if (rc != HVDS_SUCCESS) hvds__sstream_free(out);
  return rc;
}
