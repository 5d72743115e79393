/* Binomial-tree broadcast from any root, pipelined in segments for large buffers.
 *
 * Algorithm: ranks are renumbered v = (r - root) mod P so the root is 0. The parent of v != 0 is
 * v with its lowest set bit cleared; the children of v are v + m for every power of two m below
 * v's lowest set bit (below P for the root), largest subtree first. The buffer is cut into
 * segments of the chunk size (default 1 MiB; one segment for smaller buffers). A rank receives
 * segment j from its parent (segment j+1 already posted) and forwards it to every child at once,
 * so segments stream down the tree: time is about (log2(P) + nseg - 1) segment transfers rather
 * than log2(P) whole-buffer transfers. Sends of two segments may be in flight per child.
 * Steps: ceil(log2 P) levels. Preconditions: bytes and root identical on every rank.
 *
 * Tree for P = 8, root 0 (v = rank), and when each rank has segment j (level = time step):
 *
 *   v      | 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7
 *   parent | - | 0 | 0 | 2 | 0 | 4 | 4 | 6
 *   level  | 0 | 3 | 2 | 3 | 1 | 3 | 2 | 3     (root sends to 4, then 2, then 1)
 */
#include <stdio.h>

#include "collectives.h"

#define MAX_CHILDREN 32 /* log2 of the largest int */

typedef struct {
  hvds_p2p_t* p;
  char* buf;
  size_t bytes, seg, nseg;
  uint64_t tag;
  int parent;                 /* real rank, -1 at the root */
  int children[MAX_CHILDREN]; /* real ranks, largest subtree first */
  int nchildren;
  /* In flight: [0..1] segment j's receive in slot j % 2, then MAX_CHILDREN sends per slot. */
  hvds_p2p_req_t* reqs[2 + 2 * MAX_CHILDREN];
} bcast_t;

static hvds_p2p_req_t** send_slot(bcast_t* x, size_t j) {
  return x->reqs + 2 + (j % 2) * MAX_CHILDREN;
}

static void build_tree(bcast_t* x, int root) {
  int P = x->p->size, v = (x->p->rank - root + P) % P;
  int low = 1;  // lowest set bit of v; for the root, the first power of two >= P
  while (low < P && !(v & low)) low <<= 1;
  x->parent = v == 0 ? -1 : ((v - low) + root) % P;
  x->nchildren = 0;
  for (int m = low >> 1; m >= 1; m >>= 1)
    if (v + m < P) x->children[x->nchildren++] = (v + m + root) % P;
}

static size_t seg_len(const bcast_t* x, size_t j) {
  size_t off = j * x->seg;
  return x->bytes - off < x->seg ? x->bytes - off : x->seg;
}

static hvds_result_t post_recv(bcast_t* x, size_t j) {
  return hvds__p2p_irecv(x->p, x->parent, x->buf + j * x->seg, seg_len(x, j), x->tag,
                         &x->reqs[j % 2]);
}

/* Forwards segment j to every child, after the sends of segment j-2 in the same slot finished. */
static hvds_result_t forward(bcast_t* x, size_t j) {
  hvds_p2p_req_t** slot = send_slot(x, j);
  hvds_result_t rc = hvds__p2p_wait_all(x->p, slot, x->nchildren);
  for (int c = 0; c < x->nchildren && rc == HVDS_SUCCESS; c++)
    rc =
        hvds__p2p_isend(x->p, x->children[c], x->buf + j * x->seg, seg_len(x, j), x->tag, &slot[c]);
  return rc;
}

static hvds_result_t stream(bcast_t* x) {
  hvds_result_t rc = x->parent >= 0 ? post_recv(x, 0) : HVDS_SUCCESS;
  for (size_t j = 0; j < x->nseg && rc == HVDS_SUCCESS; j++) {
    if (x->parent >= 0) {
      // Keep the next segment's receive posted while this one completes and is forwarded.
      if (j + 1 < x->nseg) rc = post_recv(x, j + 1);
      hvds_result_t wrc = hvds__p2p_wait_all(x->p, &x->reqs[j % 2], 1);
      if (rc == HVDS_SUCCESS) rc = wrc;
    }
    if (rc == HVDS_SUCCESS) rc = forward(x, j);
  }
  return rc;
}

hvds_result_t hvds__broadcast(hvds_p2p_t* p, void* buf, size_t bytes, int root,
                              const hvds_coll_opts_t* o) {
  if (root < 0 || root >= p->size) {
    snprintf(p->error, sizeof p->error, "broadcast: root %d out of range [0, %d)", root, p->size);
    return HVDS_INVALID_ARGUMENT;
  }
  if (p->size == 1 || bytes == 0) return HVDS_SUCCESS;
  bcast_t x = {.p = p, .buf = buf, .bytes = bytes, .tag = o != NULL ? o->tag : 0};
  x.seg = hvds__coll_segment(o, 1);
  if (x.seg > bytes) x.seg = bytes;
  x.nseg = (bytes + x.seg - 1) / x.seg;
  build_tree(&x, root);
  hvds_result_t rc = stream(&x);
  // The last segments' sends are still in flight (everything is, after a failure).
  return hvds__p2p_finish(p, rc, x.reqs, 2 + 2 * MAX_CHILDREN);
}
