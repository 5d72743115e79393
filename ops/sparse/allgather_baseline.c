/* Baseline: Horovod's sparse path. Allgather every rank's indices and values, then merge.
 *
 * Algorithm: each rank's stream (counts known to all from the preamble) is one block of a ring
 * allgatherv (P - 1 steps); every rank then merges the P blocks in the same binary-tree order
 * (hvds__sstream_merge_many), so all ranks compute the same result bit for bit. Overlapping
 * indices travel once per rank that has them: one-shot aggregation.
 * Cost: (P - 1) alpha + (P - 1) k s beta (k entries per rank, s bytes per entry), independent of
 * overlap; merge work O(P k log P).
 * Preconditions: Sum/Average.
 *
 * Blocks held for P = 3 (ring allgatherv), then merged:
 *
 *   step   | rank 0 | rank 1 | rank 2
 *   -------+--------+--------+-------
 *   start  | 0      | 1      | 2
 *   1      | 0 2    | 1 0    | 2 1
 *   2      | 0 2 1  | 1 0 2  | 2 1 0
 *   merge  | (0+1)+2 on every rank
 */
#include <stdlib.h>
#include <string.h>

#include "sparse_internal.h"

hvds_result_t hvds__sparse_run_allgather(hvds_sparse_ctx_t* c, hvds_sstream_t* in,
                                         hvds_sstream_t* out) {
  const hvds_sparse_layout_t* lay = &c->lay;
  int P = c->p->size, r = c->p->rank;
  size_t* bytes = malloc((size_t)P * sizeof(size_t));
  hvds_sstream_t* parts = calloc((size_t)P, sizeof(hvds_sstream_t));
  char* buf = NULL;
  hvds_result_t rc = HVDS_SUCCESS;
  size_t total = 0, mine = 0;
  if (bytes == NULL || parts == NULL) goto nomem;
  for (int j = 0; j < P; j++) {
    // A rank's stream is dense exactly when it holds all dim entries.
    bytes[j] = hvds__sstream_bytes(lay, c->nnz[j], c->nnz[j] == lay->dim && lay->dim > 0);
    if (j < r) mine += bytes[j];
    total += bytes[j];
  }
  buf = hvds__sparse_buf_alloc(total);
  if (buf == NULL) goto nomem;
  if (bytes[r] > 0) memcpy(buf + mine, in->base, bytes[r]);
  rc = hvds__allgatherv(c->p, buf, bytes, &c->coll);
  if (rc != HVDS_SUCCESS) goto done;
  size_t at = 0;
  for (int j = 0; j < P; j++) {
    hvds__sstream_view(lay, buf + at, 0, lay->dim, c->nnz[j], c->nnz[j] == lay->dim && lay->dim > 0,
                       &parts[j]);
    at += bytes[j];
  }
  rc = hvds__sstream_merge_many(lay, parts, P, 1, out);
  // A single block comes back as a view into buf: take a copy before buf goes.
  if (rc == HVDS_SUCCESS) rc = hvds__sstream_own(lay, out);
  if (rc == HVDS_SUCCESS) goto done;
  *out = (hvds_sstream_t){0, lay->dim, 0, 0, NULL, NULL};
nomem:
  rc = hvds__sparse_nomem(c, "sparse allgather");
done:
  free(bytes);
  free(parts);
  hvds__sparse_buf_free(buf);
  return rc;
}
