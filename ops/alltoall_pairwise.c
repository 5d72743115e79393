/* Pairwise-exchange alltoallv.
 *
 * Algorithm: at step k (k = 1..P-1) rank r sends its block for rank (r+k) mod P and receives
 * the block from rank (r-k) mod P, both posted together; step 0 is the local copy. Every pair
 * of ranks exchanges exactly once, and at each step every rank has exactly one send and one
 * receive in flight, so no link carries two messages at once.
 * Steps: P-1 exchanges plus one memcpy.
 * Preconditions: recv_bytes[s] on rank r equals send_bytes[r] on rank s (zero allowed; empty
 * blocks still travel as zero-byte messages); send_bytes[r] == recv_bytes[r] for the self block;
 * sendbuf and recvbuf do not overlap.
 *
 * Partners for P = 4 (send to / receive from):
 *
 *   step | rank 0 | rank 1 | rank 2 | rank 3
 *   -----+--------+--------+--------+-------
 *    0   | self   | self   | self   | self
 *    1   | 1 / 3  | 2 / 0  | 3 / 1  | 0 / 2
 *    2   | 2 / 2  | 3 / 3  | 0 / 0  | 1 / 1
 *    3   | 3 / 1  | 0 / 2  | 1 / 3  | 2 / 0
 */
#include <stdio.h>
#include <string.h>

#include "collectives.h"

hvds_result_t hvds__alltoallv(hvds_p2p_t* p, const void* sendbuf, const size_t* send_bytes,
                              const size_t* send_off, void* recvbuf, const size_t* recv_bytes,
                              const size_t* recv_off, const hvds_coll_opts_t* o) {
  int P = p->size, r = p->rank;
  uint64_t tag = o != NULL ? o->tag : 0;
  const char* sb = sendbuf;
  char* rb = recvbuf;
  // Step 0: this rank's own block.
  if (send_bytes[r] != recv_bytes[r]) {
    snprintf(p->error, sizeof p->error, "alltoallv: sends %zu bytes to itself but expects %zu",
             send_bytes[r], recv_bytes[r]);
    return HVDS_INVALID_ARGUMENT;
  }
  if (send_bytes[r] > 0) memcpy(rb + recv_off[r], sb + send_off[r], send_bytes[r]);
  for (int k = 1; k < P; k++) {
    // Step k: send to the rank k ahead, receive from the rank k behind.
    int to = (r + k) % P, from = (r - k + P) % P;
    hvds_result_t rc =
        hvds__p2p_sendrecv(p, to, send_bytes[to] ? sb + send_off[to] : NULL, send_bytes[to], from,
                           recv_bytes[from] ? rb + recv_off[from] : NULL, recv_bytes[from], tag);
    if (rc != HVDS_SUCCESS) return rc;
  }
  return HVDS_SUCCESS;
}
