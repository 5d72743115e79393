/* Dissemination barrier.
 *
 * Algorithm: in round i (distance d = 2^i, while d < P) rank r sends an empty message to rank
 * (r+d) mod P and waits for one from rank (r-d) mod P. After round i every rank has heard,
 * directly or through a chain, from the 2^(i+1) - 1 ranks behind it, so after ceil(log2 P)
 * rounds every rank knows that every rank arrived.
 * Steps: ceil(log2 P) rounds of one zero-byte send and receive. Works for any P.
 *
 * Ranks known to have arrived, as seen from rank 0, for P = 5:
 *
 *   round | d | rank 0 hears from | known arrived at rank 0
 *   ------+---+-------------------+------------------------
 *     0   | 1 | 4                 | 0 4
 *     1   | 2 | 3 (knows 3 2)     | 0 4 3 2
 *     2   | 4 | 1 (knows 1 0 4 3) | all
 */
#include "check.h"
#include "collectives.h"

hvds_result_t hvds__barrier(hvds_p2p_t* p, const hvds_coll_opts_t* o) {
  int P = p->size, r = p->rank;
  uint64_t tag = o != NULL ? o->tag : 0;
  for (int d = 1; d < P; d <<= 1) {
    // Round: tell the rank d ahead, hear from the rank d behind.
    HVDS_CHECK(hvds__p2p_sendrecv(p, (r + d) % P, NULL, 0, (r - d + P) % P, NULL, 0, tag));
  }
  return HVDS_SUCCESS;
}
