/* Ring allgather of variable-size blocks, in place.
 *
 * Algorithm: block b (bytes[b] bytes, zero allowed) starts on rank b. At step k (k = 0..P-2)
 * rank r sends block (r-k) mod P to rank r+1 and receives block (r-k-1) mod P from rank r-1,
 * straight into its place in buf; the block received at step k is the one forwarded at k+1.
 * Steps: P-1. Each rank receives every block but its own once.
 * Preconditions: bytes[] identical on every rank; this rank's block filled on entry.
 * Pipelining: each step moves its blocks in segments of the chunk size, the next segment posted
 * before the current one is waited for. Empty blocks send nothing.
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

static hvds_result_t ring_steps(hvds_p2p_t* p, char* buf, const size_t* off, uint64_t tag,
                                const hvds_p2p_seg_t* seg) {
  int P = p->size, r = p->rank;
  int right = (r + 1) % P, left = (r + P - 1) % P;
  for (int k = 0; k < P - 1; k++) {
    // Step k: forward block r-k (ours at k = 0, then the one just received); take block r-k-1.
    int sb = ((r - k) % P + P) % P;
    int rb = ((r - k - 1) % P + P) % P;
    size_t sn = off[sb + 1] - off[sb], rn = off[rb + 1] - off[rb];
    hvds_result_t rc = hvds__p2p_sendrecv_seg(p, right, sn ? buf + off[sb] : NULL, sn, left,
                                              rn ? buf + off[rb] : NULL, rn, tag, seg);
    if (rc != HVDS_SUCCESS) return rc;
  }
  return HVDS_SUCCESS;
}

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
    rc = ring_steps(p, buf, off, o != NULL ? o->tag : 0, &seg);
  }
  free(off);
  return rc;
}
