/* Ring allgather of variable-size blocks, in place.
 *
 * Algorithm: block b (bytes[b] bytes, zero allowed) starts on rank b. At step k (k = 0..P-2)
 * rank r sends block (r-k) mod P to rank r+1 and receives block (r-k-1) mod P from rank r-1,
 * straight into its place in buf; the block received at step k is the one forwarded at k+1.
 * Steps: P-1. Each rank receives every block but its own once.
 * Preconditions: bytes[] identical on every rank; this rank's block filled on entry.
 * Pipelining: the steps run as one stream of chunk-size segments (hvds__ring_stream): a segment
 * received at step k is forwarded at step k+1 without waiting for the rest of its block. Empty
 * blocks send nothing.
 *
 * Blocks held for P = 4 (after the step):
 *
 *   step | rank 0   | rank 1   | rank 2   | rank 3
 *   -----+----------+----------+----------+---------
 *   init | 0        | 1        | 2        | 3
 *    0   | 0 3      | 1 0      | 2 1      | 3 2
 *    1   | 0 3 2    | 1 0 3    | 2 1 0    | 3 2 1
 *    2   | 0 3 2 1  | 1 0 3 2  | 2 1 0 3  | 3 2 1 0
 */
#include <stdlib.h>

#include "collectives.h"

hvds_result_t hvds__allgatherv(hvds_p2p_t* p, void* buf, const size_t* bytes,
                               const hvds_coll_opts_t* o) {
  if (p->size == 1) return HVDS_SUCCESS;
  size_t* off = malloc(((size_t)p->size + 1) * sizeof(size_t));
  if (off == NULL) return hvds__coll_nomem(p, "allgatherv");
  off[0] = 0;
  for (int b = 0; b < p->size; b++) off[b + 1] = off[b] + bytes[b];
  hvds_result_t rc = HVDS_SUCCESS;
  if (off[p->size] > 0) {
    hvds_p2p_seg_t seg = {hvds__coll_segment(o, 1), NULL, HVDS_UINT8, HVDS_SUM};
    rc = hvds__ring_stream(p, buf, off, 0, o != NULL ? o->tag : 0, &seg);
  }
  free(off);
  return rc;
}
