/* Bandwidth-optimal ring allreduce: ring reduce-scatter, then ring allgather.
 *
 * Algorithm: split the count elements into P blocks, the first count % P of them one element
 * longer (blocks may be empty when count < P). Reduce-scatter (reducescatter_ring.c) leaves the
 * full reduction of block r on rank r after P-1 steps; allgather (allgather_ring.c) passes the
 * finished blocks around the ring in P-1 more steps.
 * Steps: 2 (P-1). Each rank sends and receives 2 (P-1)/P of the buffer, whatever P is.
 * Preconditions: none beyond identical arguments on every rank; any count (0, < P, odd), P >= 1.
 * Every rank ends with bitwise identical results (each element is reduced on one chain only).
 * Pipelining: both phases move each step in segments of o->chunk_bytes (default 1 MiB, rounded
 * to the element size); segment j+1 is posted before segment j is reduced.
 *
 * Ownership for P = 3, blocks A B C ("A*" = A reduced over all ranks):
 *
 *   phase           | rank 0   | rank 1   | rank 2
 *   ----------------+----------+----------+---------
 *   reduce-scatter 0| B: r2+r0 | C: r0+r1 | A: r1+r2
 *   reduce-scatter 1| A*       | B*       | C*
 *   allgather 0     | A* C*    | B* A*    | C* B*
 *   allgather 1     | A* B* C* | A* B* C* | A* B* C*
 */
#include <stdlib.h>

#include "collectives.h"
#include "reduce.h"

hvds_result_t hvds__allreduce_ring(hvds_p2p_t* p, void* buf, size_t count, hvds_dtype_t dtype,
                                   hvds_reduce_op_t op, const hvds_coll_opts_t* o) {
  hvds_result_t rc = hvds__coll_check(p, dtype, op);
  if (rc != HVDS_SUCCESS || count == 0 || p->size == 1) return rc;
  size_t P = (size_t)p->size, esize = hvds__dtype_bytes(dtype);
  size_t* counts = malloc(2 * P * sizeof(size_t));
  if (counts == NULL) return hvds__coll_nomem(p, "allreduce_ring");
  size_t* bytes = counts + P;
  for (size_t b = 0; b < P; b++) {
    counts[b] = count / P + (b < count % P ? 1 : 0);
    bytes[b] = counts[b] * esize;
  }
  // Phase 1: rank r ends with block r reduced over every rank.
  rc = hvds__reducescatter(p, buf, counts, dtype, op, o);
  // Phase 2: every rank collects every finished block.
  if (rc == HVDS_SUCCESS) rc = hvds__allgatherv(p, buf, bytes, o);
  free(counts);
  return rc;
}
