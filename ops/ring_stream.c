/* The ring's P-1 steps as one stream of segments, shared by ring reduce-scatter and allgather.
 *
 * At step k rank r sends block (r-k-shift) to its right and receives block (r-k-shift-1) from
 * its left; the block received at step k is the one sent at step k+1. Each step is cut into
 * segments, and a unit is one segment of one step (both directions). Units run in order with
 * up to RING_WINDOW in flight, across step boundaries: segment j of step k+1 goes out as soon as
 * segment j of step k has arrived (and been reduced), not when the whole of step k has. Running
 * the steps one after the other instead drains the pipeline P-1 times per phase and lets every
 * rank's lateness add up around the ring; on shaped links that costs several percent.
 *
 * Deadlock freedom: every rank posts units in the same order, a unit's send depends only on an
 * earlier unit, and when nothing is in flight the next unit's dependency is already finished.
 */
#include <stdio.h>
#include <stdlib.h>

#include "collectives.h"
#include "reduce.h"

#define RING_WINDOW 2 /* units in flight; the reduce-scatter scratch holds this many segments */

typedef struct {
  hvds_p2p_t* p;
  char* buf;
  const size_t* off; /* byte offset of each block, off[P] = total */
  int shift, right, left;
  size_t seg;
  uint64_t tag;
  const hvds_p2p_seg_t* opt;
  size_t* first;                          /* first unit of each step, first[P-1] = units */
  hvds_p2p_req_t* reqs[2 * RING_WINDOW]; /* per slot: receive, send */
} ring_t;

/* A unit's position: step k, segment j, flat index u. */
typedef struct {
  int k;
  size_t j, u;
} unit_t;

static int send_block(const ring_t* x, int k) {
  int P = x->p->size;
  return ((x->p->rank - k - x->shift) % P + P) % P;
}

static int recv_block(const ring_t* x, int k) { return send_block(x, k + 1); }

static size_t block_bytes(const ring_t* x, int b) { return x->off[b + 1] - x->off[b]; }

static size_t seg_len(size_t total, size_t seg, size_t j) {
  size_t at = j * seg;
  return at >= total ? 0 : (total - at < seg ? total - at : seg);
}

static void next_unit(const ring_t* x, unit_t* it) {
  it->u++;
  it->j++;
  while (it->k < x->p->size - 1 && it->u == x->first[it->k + 1]) {
    it->k++;
    it->j = 0;
  }
}

/* True when unit `it` may go out: its send reads a segment an earlier unit had to finish. */
static int ready(const ring_t* x, const unit_t* it, size_t finished) {
  if (it->k == 0 || seg_len(block_bytes(x, send_block(x, it->k)), x->seg, it->j) == 0) return 1;
  return x->first[it->k - 1] + it->j < finished;
}

static hvds_result_t post(ring_t* x, const unit_t* it) {
  int slot = (int)(it->u % RING_WINDOW), sb = send_block(x, it->k), rb = recv_block(x, it->k);
  size_t rlen = seg_len(block_bytes(x, rb), x->seg, it->j);
  size_t slen = seg_len(block_bytes(x, sb), x->seg, it->j);
  hvds_result_t rc = HVDS_SUCCESS;
  if (rlen > 0) {
    char* dst = x->opt->scratch ? (char*)x->opt->scratch + (size_t)slot * x->seg
                                : x->buf + x->off[rb] + it->j * x->seg;
    rc = hvds__p2p_irecv(x->p, x->left, dst, rlen, x->tag, &x->reqs[2 * slot]);
  }
  if (rc == HVDS_SUCCESS && slen > 0)
    rc = hvds__p2p_isend(x->p, x->right, x->buf + x->off[sb] + it->j * x->seg, slen, x->tag,
                         &x->reqs[2 * slot + 1]);
  return rc;
}

/* Waits for both directions of a unit, then folds the received segment into its block. */
static hvds_result_t finish(ring_t* x, const unit_t* it) {
  int slot = (int)(it->u % RING_WINDOW), rb = recv_block(x, it->k);
  hvds_result_t rc = hvds__p2p_wait_all(x->p, &x->reqs[2 * slot], 2);
  size_t rlen = seg_len(block_bytes(x, rb), x->seg, it->j);
  if (rc != HVDS_SUCCESS || x->opt->scratch == NULL || rlen == 0) return rc;
  size_t esize = hvds__dtype_bytes(x->opt->dtype);
  const char* src = (const char*)x->opt->scratch + (size_t)slot * x->seg;
  rc = hvds__reduce(x->buf + x->off[rb] + it->j * x->seg, src, rlen / esize, x->opt->dtype,
                    x->opt->op);
  if (rc != HVDS_SUCCESS)
    snprintf(x->p->error, sizeof x->p->error, "reduce: op %d not supported for dtype %d",
             (int)x->opt->op, (int)x->opt->dtype);
  return rc;
}

hvds_result_t hvds__ring_stream(hvds_p2p_t* p, void* buf, const size_t* off, int shift,
                                uint64_t tag, const hvds_p2p_seg_t* seg) {
  int P = p->size;
  if (P < 2) return HVDS_SUCCESS;
  ring_t x = {p, buf, off, shift, (p->rank + 1) % P, (p->rank + P - 1) % P, seg->seg_bytes,
              tag, seg, NULL, {NULL}};
  x.first = malloc((size_t)P * sizeof(size_t));
  if (x.first == NULL) return hvds__coll_nomem(p, "ring");
  size_t most = 0;
  for (int b = 0; b < P; b++)
    if (block_bytes(&x, b) > most) most = block_bytes(&x, b);
  if (x.seg == 0 || x.seg > most) x.seg = most;
  x.first[0] = 0;
  for (int k = 0; k < P - 1; k++) {
    size_t s = block_bytes(&x, send_block(&x, k)), r = block_bytes(&x, recv_block(&x, k));
    size_t m = s > r ? s : r;
    x.first[k + 1] = x.first[k] + (x.seg ? (m + x.seg - 1) / x.seg : 0);
  }
  size_t units = x.first[P - 1];
  unit_t posted = {0, 0, 0}, done = {0, 0, 0};
  // Steps that move nothing have no units: start both cursors on the first step that does.
  while (posted.k < P - 1 && x.first[posted.k + 1] == 0) posted.k++;
  done = posted;
  hvds_result_t rc = HVDS_SUCCESS;
  while (done.u < units && rc == HVDS_SUCCESS) {
    while (rc == HVDS_SUCCESS && posted.u < units && posted.u - done.u < RING_WINDOW &&
           ready(&x, &posted, done.u)) {
      rc = post(&x, &posted);
      next_unit(&x, &posted);
    }
    if (rc == HVDS_SUCCESS) rc = finish(&x, &done);
    next_unit(&x, &done);
  }
  rc = hvds__p2p_finish(p, rc, x.reqs, 2 * RING_WINDOW);  // pending only after a failure
  free(x.first);
  return rc;
}
