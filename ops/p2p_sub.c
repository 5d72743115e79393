/* Sub-communicator views: a communicator over a subset of a parent's ranks (process sets, the
 * local and cross groups of the hierarchical allreduce).
 *
 * A view owns no connections. Each call maps the view rank to the parent rank and moves the tag
 * into the view's tag space: parent_tag = (space_id << 48) | tag, so tags given to a view must be
 * below 2^48, and so must the tags of operations run on the parent itself (space 0). Requests are
 * the parent's, passed through unchanged. After a parent failure the view copies the parent's
 * message and translates failed_peer into view numbering (-1 when the peer is not in the view).
 *
 * Thread-safety: as the parent's. Two views of one parent used from two threads at once need a
 * parent that allows concurrent calls; the copied error message is then best effort.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "p2p.h"

#define TAG_BITS 48
#define TAG_LIMIT ((uint64_t)1 << TAG_BITS)

typedef struct {
  hvds_p2p_t* parent; /* not owned */
  uint64_t space;     /* space_id << 48 */
  int n;              /* number of ranks in the view */
  int ranks[];        /* view rank -> parent rank */
} sub_t;

static sub_t* sub_of(hvds_p2p_t* p) { return (sub_t*)p->impl; }

/* Copies the parent's failure into the view, translating the failed peer. */
static hvds_result_t sub_fail(hvds_p2p_t* p, hvds_result_t rc) {
  sub_t* s = sub_of(p);
  memcpy(p->error, s->parent->error, sizeof p->error);
  p->failed_peer = -1;
  for (int i = 0; i < s->n; i++)
    if (s->ranks[i] == s->parent->failed_peer) p->failed_peer = i;
  return rc;
}

static hvds_result_t sub_tag(hvds_p2p_t* p, uint64_t tag, uint64_t* out) {
  if (tag >= TAG_LIMIT) {
    snprintf(p->error, sizeof p->error, "sub-communicator: tag %llu is not below 2^48",
             (unsigned long long)tag);
    return HVDS_INVALID_ARGUMENT;
  }
  *out = sub_of(p)->space | tag;
  return HVDS_SUCCESS;
}

static hvds_result_t sub_isend(hvds_p2p_t* p, int peer, const void* buf, size_t bytes, uint64_t tag,
                               hvds_p2p_req_t** req) {
  sub_t* s = sub_of(p);
  uint64_t ptag;
  hvds_result_t rc = sub_tag(p, tag, &ptag);
  if (rc != HVDS_SUCCESS) return rc;
  rc = s->parent->ops->isend(s->parent, s->ranks[peer], buf, bytes, ptag, req);
  return rc == HVDS_SUCCESS ? rc : sub_fail(p, rc);
}

static hvds_result_t sub_irecv(hvds_p2p_t* p, int peer, void* buf, size_t bytes, uint64_t tag,
                               hvds_p2p_req_t** req) {
  sub_t* s = sub_of(p);
  uint64_t ptag;
  hvds_result_t rc = sub_tag(p, tag, &ptag);
  if (rc != HVDS_SUCCESS) return rc;
  rc = s->parent->ops->irecv(s->parent, s->ranks[peer], buf, bytes, ptag, req);
  return rc == HVDS_SUCCESS ? rc : sub_fail(p, rc);
}

static hvds_result_t sub_wait(hvds_p2p_t* p, hvds_p2p_req_t* req, int timeout_ms) {
  sub_t* s = sub_of(p);
  hvds_result_t rc =
      s->parent->ops->wait(s->parent, req, timeout_ms < 0 ? p->timeout_ms : timeout_ms);
  return rc == HVDS_SUCCESS ? rc : sub_fail(p, rc);
}

/* A failure is fatal to the job: aborting a view aborts the whole parent. */
static void sub_abort(hvds_p2p_t* p) {
  sub_t* s = sub_of(p);
  s->parent->ops->abort(s->parent);
}

static void sub_destroy(hvds_p2p_t* p) { free(p); }  // impl lives in the same block

static const hvds_p2p_ops_t sub_ops = {1,        "sub",     sub_isend,  sub_irecv,
                                       sub_wait, sub_abort, sub_destroy, NULL, NULL, NULL};

/* Returns this rank's index in ranks, -1 if absent, -2 if ranks is malformed. */
static int find_self(const hvds_p2p_t* parent, const int* ranks, int n) {
  int self = -1;
  for (int i = 0; i < n; i++) {
    if (ranks[i] < 0 || ranks[i] >= parent->size) return -2;
    for (int j = 0; j < i; j++)
      if (ranks[j] == ranks[i]) return -2;
    if (ranks[i] == parent->rank) self = i;
  }
  return self;
}

hvds_result_t hvds__p2p_sub_create(hvds_p2p_t* parent, const int* ranks, int n, uint16_t space_id,
                                   hvds_p2p_t** out) {
  if (out == NULL || parent == NULL) return HVDS_INVALID_ARGUMENT;
  *out = NULL;
  int self = (ranks == NULL || n <= 0 || space_id == 0) ? -2 : find_self(parent, ranks, n);
  if (self == -2) {
    snprintf(parent->error, sizeof parent->error,
             "sub-communicator: need 1..%d distinct ranks in range and space_id > 0", parent->size);
    return HVDS_INVALID_ARGUMENT;
  }
  if (self < 0) return HVDS_SUCCESS;  // not a member
  // One block: the communicator, then the view state with its rank table.
  size_t head = (sizeof(hvds_p2p_t) + _Alignof(sub_t) - 1) / _Alignof(sub_t) * _Alignof(sub_t);
  char* mem = malloc(head + sizeof(sub_t) + (size_t)n * sizeof(int));
  if (mem == NULL) {
    snprintf(parent->error, sizeof parent->error, "sub-communicator: out of memory");
    return HVDS_SYSTEM_ERROR;
  }
  hvds_p2p_t* p = (hvds_p2p_t*)mem;
  sub_t* s = (sub_t*)(mem + head);
  s->parent = parent;
  s->space = (uint64_t)space_id << TAG_BITS;
  s->n = n;
  memcpy(s->ranks, ranks, (size_t)n * sizeof(int));
  *p = (hvds_p2p_t){.rank = self,
                    .size = n,
                    .timeout_ms = parent->timeout_ms,
                    .ops = &sub_ops,
                    .impl = s,
                    .failed_peer = -1};
  *out = p;
  return HVDS_SUCCESS;
}
