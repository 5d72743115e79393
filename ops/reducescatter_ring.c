/* Ring reduce-scatter.
 *
 * Algorithm: the buffer is P blocks (block b has counts[b] elements, uneven and zero allowed).
 * At step k (k = 0..P-2) rank r sends block (r-k-1) mod P to rank r+1 and receives block
 * (r-k-2) mod P from rank r-1, folding it into its own copy. A block travels P-1 hops and picks
 * up every rank's contribution; the last block rank r folds, at step P-2, is block r.
 * Steps: P-1. Each rank sends and receives about (P-1)/P of the buffer.
 * Preconditions: op commutative and associative (every hvds op is); counts identical on every
 * rank. Results are identical on every rank's block: each element is reduced along one chain.
 * Pipelining: the steps run as one stream of chunk-size segments (hvds__ring_stream); the next
 * segment is on the wire while the current one is reduced, across step boundaries too. Empty
 * blocks send nothing.
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
  for (int b = 0; b <= p->size; b++) off[b] *= esize;  // the stream takes byte offsets
  hvds_p2p_seg_t seg = {segb, scratch, dtype, op};
  rc = hvds__ring_stream(p, buf, off, 1, o != NULL ? o->tag : 0, &seg);
  free(scratch);
  free(off);
  return rc;
}
