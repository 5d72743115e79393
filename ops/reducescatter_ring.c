/* Ring reduce-scatter.
 *
 * Algorithm: the buffer is P blocks (block b has counts[b] elements, uneven and zero allowed).
 * At step k (k = 0..P-2) rank r sends block (r-k-1) mod P to rank r+1 and receives block
 * (r-k-2) mod P from rank r-1, folding it into its own copy. A block travels P-1 hops and picks
 * up every rank's contribution; the last block rank r folds, at step P-2, is block r.
 * Steps: P-1. Each rank sends and receives about (P-1)/P of the buffer.
 * Preconditions: op commutative and associative (every hvds op is); counts identical on every
 * rank. Results are identical on every rank's block: each element is reduced along one chain.
 * Pipelining: every step is cut into segments of the chunk size (hvds__p2p_sendrecv_seg); the
 * next segment is on the wire while the current one is reduced. Empty blocks send nothing.
 *
 * Ownership for P = 4 ("b2+1" = block 2 holding the sum of ranks 1 and 2's contributions):
 *
 *   step | rank 0      | rank 1      | rank 2      | rank 3
 *   -----+-------------+-------------+-------------+------------
 *    0   | b2 += r3.b2 | b3 += r0.b3 | b0 += r1.b0 | b1 += r2.b1
 *    1   | b1 += r3.b1 | b2 += r0.b2 | b3 += r1.b3 | b0 += r2.b0
 *    2   | b0 += r3.b0 | b1 += r0.b1 | b2 += r1.b2 | b3 += r2.b3   (b_r complete on rank r)
 */
#include <stdlib.h>

#include "collectives.h"
#include "reduce.h"

/* Fills off[0..P] with element offsets of each block; returns the largest block's count. */
static size_t block_offsets(const size_t* counts, int nblocks, size_t* off) {
  size_t most = 0;
  off[0] = 0;
  for (int b = 0; b < nblocks; b++) {
    off[b + 1] = off[b] + counts[b];
    if (counts[b] > most) most = counts[b];
  }
  return most;
}

/* The P-1 steps, with off[] and the segment scratch already set up. */
static hvds_result_t ring_steps(hvds_p2p_t* p, char* buf, const size_t* off, size_t esize,
                                uint64_t tag, const hvds_p2p_seg_t* seg) {
  int P = p->size, r = p->rank;
  int right = (r + 1) % P, left = (r + P - 1) % P;
  for (int k = 0; k < P - 1; k++) {
    // Step k: pass block r-k-1 on to the right; fold block r-k-2 arriving from the left.
    int sb = ((r - k - 1) % P + P) % P;
    int rb = ((r - k - 2) % P + P) % P;
    size_t sn = off[sb + 1] - off[sb], rn = off[rb + 1] - off[rb];
    hvds_result_t rc =
        hvds__p2p_sendrecv_seg(p, right, sn ? buf + off[sb] * esize : NULL, sn * esize, left,
                               rn ? buf + off[rb] * esize : NULL, rn * esize, tag, seg);
    if (rc != HVDS_SUCCESS) return rc;
  }
  return HVDS_SUCCESS;
}

hvds_result_t hvds__reducescatter(hvds_p2p_t* p, void* buf, const size_t* counts,
                                  hvds_dtype_t dtype, hvds_reduce_op_t op,
                                  const hvds_coll_opts_t* o) {
  hvds_result_t rc = hvds__coll_check(p, dtype, op);
  if (rc != HVDS_SUCCESS || p->size == 1) return rc;
  size_t esize = hvds__dtype_bytes(dtype);
  size_t* off = malloc(((size_t)p->size + 1) * sizeof(size_t));
  if (off == NULL) return hvds__coll_nomem(p, "reducescatter");
  size_t most = block_offsets(counts, p->size, off);
  if (most == 0) {  // every block empty: nothing to move
    free(off);
    return HVDS_SUCCESS;
  }
  // Double-buffered receive scratch: one segment being reduced, the next one arriving.
  size_t segb = hvds__coll_segment(o, esize);
  if (segb > most * esize) segb = most * esize;
  void* scratch = malloc(2 * segb);
  if (scratch == NULL) {
    free(off);
    return hvds__coll_nomem(p, "reducescatter");
  }
  hvds_p2p_seg_t seg = {segb, scratch, dtype, op};
  rc = ring_steps(p, buf, off, esize, o != NULL ? o->tag : 0, &seg);
  free(scratch);
  free(off);
  return rc;
}
