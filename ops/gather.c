/* Linear gatherv to a root.
 *
 * Algorithm: the root posts one receive per other rank, all at once, into that rank's place in
 * recvbuf, copies its own block, and waits for them all; every other rank sends its block.
 * Steps: 1 (the root's link is the bottleneck: it receives the sum of the blocks). Fit for the
 * control plane's small gathers, where latency dominates and P receives in flight are cheap.
 * Preconditions: root identical everywhere; on the root bytes[] holds every rank's size, on the
 * others bytes[rank] holds its own. Zero-byte blocks still travel as zero-byte messages.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives.h"

static hvds_result_t gather_at_root(hvds_p2p_t* p, const void* sendbuf, char* recvbuf,
                                    const size_t* bytes, uint64_t tag) {
  hvds_p2p_req_t** reqs = calloc((size_t)p->size, sizeof *reqs);
  if (reqs == NULL) return hvds__coll_nomem(p, "gatherv");
  hvds_result_t rc = HVDS_SUCCESS;
  size_t off = 0;
  for (int r = 0; r < p->size; r++) {
    char* dst = bytes[r] ? recvbuf + off : NULL;
    off += bytes[r];
    if (r == p->rank) {
      // The root's own block: copied unless the caller already put it in place.
      if (sendbuf != NULL && bytes[r] > 0 && sendbuf != dst) memmove(dst, sendbuf, bytes[r]);
    } else if (rc == HVDS_SUCCESS) {
      rc = hvds__p2p_irecv(p, r, dst, bytes[r], tag, &reqs[r]);
    }
  }
  rc = hvds__p2p_finish(p, rc, reqs, p->size);
  free(reqs);
  return rc;
}

hvds_result_t hvds__gatherv(hvds_p2p_t* p, const void* sendbuf, void* recvbuf, const size_t* bytes,
                            int root, const hvds_coll_opts_t* o) {
  if (root < 0 || root >= p->size) {
    snprintf(p->error, sizeof p->error, "gatherv: root %d out of range [0, %d)", root, p->size);
    return HVDS_INVALID_ARGUMENT;
  }
  uint64_t tag = o != NULL ? o->tag : 0;
  if (p->rank == root) return gather_at_root(p, sendbuf, recvbuf, bytes, tag);
  return hvds__p2p_send(p, root, sendbuf, bytes[p->rank], tag);
}
