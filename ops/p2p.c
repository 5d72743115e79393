/* Thin wrappers over a point-to-point implementation (p2p.h): the one place for argument checks
 * and tracing, plus the blocking forms and the pipelined exchange step the algorithms share. */
#include "p2p.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "log.h"
#include "reduce.h"

/* Records an argument error in p->error and returns HVDS_INVALID_ARGUMENT. */
static hvds_result_t bad_argument(hvds_p2p_t* p, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));

static hvds_result_t bad_argument(hvds_p2p_t* p, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->error, sizeof p->error, fmt, ap);
  va_end(ap);
  HVDS_DEBUG("p2p: %s", p->error);
  return HVDS_INVALID_ARGUMENT;
}

static hvds_result_t check_args(hvds_p2p_t* p, const char* what, int peer, const void* buf,
                                size_t bytes, hvds_p2p_req_t** req) {
  if (req == NULL) return bad_argument(p, "%s: req is NULL", what);
  *req = NULL;
  if (peer < 0 || peer >= p->size)
    return bad_argument(p, "%s: peer %d out of range [0, %d)", what, peer, p->size);
  if (buf == NULL && bytes > 0)
    return bad_argument(p, "%s: NULL buffer with %zu bytes", what, bytes);
  return HVDS_SUCCESS;
}

hvds_result_t hvds__p2p_isend(hvds_p2p_t* p, int peer, const void* buf, size_t bytes, uint64_t tag,
                              hvds_p2p_req_t** req) {
  if (p == NULL) return HVDS_INVALID_ARGUMENT;
  HVDS_CHECK(check_args(p, "isend", peer, buf, bytes, req));
  HVDS_TRACE("p2p %s: isend %zu bytes to %d tag %llu", p->ops->name, bytes, peer,
             (unsigned long long)tag);
  return p->ops->isend(p, peer, buf, bytes, tag, req);
}

hvds_result_t hvds__p2p_irecv(hvds_p2p_t* p, int peer, void* buf, size_t bytes, uint64_t tag,
                              hvds_p2p_req_t** req) {
  if (p == NULL) return HVDS_INVALID_ARGUMENT;
  HVDS_CHECK(check_args(p, "irecv", peer, buf, bytes, req));
  HVDS_TRACE("p2p %s: irecv %zu bytes from %d tag %llu", p->ops->name, bytes, peer,
             (unsigned long long)tag);
  return p->ops->irecv(p, peer, buf, bytes, tag, req);
}

hvds_result_t hvds__p2p_wait(hvds_p2p_t* p, hvds_p2p_req_t* req) {
  if (p == NULL) return HVDS_INVALID_ARGUMENT;
  if (req == NULL) return bad_argument(p, "wait: req is NULL");
  hvds_result_t rc = p->ops->wait(p, req, p->timeout_ms);
  if (rc != HVDS_SUCCESS) HVDS_DEBUG("p2p %s: wait failed: %s", p->ops->name, p->error);
  return rc;
}

hvds_result_t hvds__p2p_wait_all(hvds_p2p_t* p, hvds_p2p_req_t** reqs, int n) {
  hvds_result_t first = HVDS_SUCCESS;
  char saved[sizeof p->error];
  int saved_peer = -1;
  for (int i = 0; i < n; i++) {
    if (reqs[i] == NULL) continue;
    hvds_result_t rc = hvds__p2p_wait(p, reqs[i]);
    reqs[i] = NULL;  // freed by wait in every case
    if (rc != HVDS_SUCCESS && first == HVDS_SUCCESS) {
      first = rc;
      memcpy(saved, p->error, sizeof saved);
      saved_peer = p->failed_peer;
    }
  }
  if (first != HVDS_SUCCESS) {  // later failures must not hide the first one's message
    memcpy(p->error, saved, sizeof saved);
    p->failed_peer = saved_peer;
  }
  return first;
}

hvds_result_t hvds__p2p_finish(hvds_p2p_t* p, hvds_result_t rc, hvds_p2p_req_t** reqs, int n) {
  if (rc == HVDS_SUCCESS) return hvds__p2p_wait_all(p, reqs, n);
  char saved[sizeof p->error];
  int saved_peer = p->failed_peer;
  memcpy(saved, p->error, sizeof saved);
  hvds__p2p_wait_all(p, reqs, n);
  memcpy(p->error, saved, sizeof saved);
  p->failed_peer = saved_peer;
  return rc;
}

hvds_result_t hvds__p2p_send(hvds_p2p_t* p, int peer, const void* buf, size_t bytes, uint64_t tag) {
  hvds_p2p_req_t* req;
  hvds_result_t rc = hvds__p2p_isend(p, peer, buf, bytes, tag, &req);
  return rc == HVDS_SUCCESS ? hvds__p2p_wait(p, req) : rc;
}

hvds_result_t hvds__p2p_recv(hvds_p2p_t* p, int peer, void* buf, size_t bytes, uint64_t tag) {
  hvds_p2p_req_t* req;
  hvds_result_t rc = hvds__p2p_irecv(p, peer, buf, bytes, tag, &req);
  return rc == HVDS_SUCCESS ? hvds__p2p_wait(p, req) : rc;
}

hvds_result_t hvds__p2p_sendrecv(hvds_p2p_t* p, int to, const void* sbuf, size_t sbytes, int from,
                                 void* rbuf, size_t rbytes, uint64_t tag) {
  hvds_p2p_req_t* reqs[2] = {NULL, NULL};
  // Receive first, so a neighbour's message always finds a posted buffer.
  hvds_result_t rc = hvds__p2p_irecv(p, from, rbuf, rbytes, tag, &reqs[0]);
  if (rc == HVDS_SUCCESS) rc = hvds__p2p_isend(p, to, sbuf, sbytes, tag, &reqs[1]);
  return hvds__p2p_finish(p, rc, reqs, 2);
}

/* State of one hvds__p2p_sendrecv_seg() call. Slot j % 2 holds segment j's requests. */
typedef struct {
  hvds_p2p_t* p;
  int to, from;
  const char* sbuf;
  char* rbuf;
  size_t sbytes, rbytes, seg;
  uint64_t tag;
  const hvds_p2p_seg_t* opt;
  hvds_p2p_req_t* reqs[4]; /* recv slot 0, recv slot 1, send slot 0, send slot 1 */
} seg_xfer_t;

static size_t seg_len(size_t total, size_t seg, size_t j) {
  size_t off = j * seg;
  return off >= total ? 0 : (total - off < seg ? total - off : seg);
}

/* Posts segment j's receive (into scratch or in place) and send. */
static hvds_result_t seg_post(seg_xfer_t* x, size_t j) {
  size_t rlen = seg_len(x->rbytes, x->seg, j), slen = seg_len(x->sbytes, x->seg, j);
  hvds_result_t rc = HVDS_SUCCESS;
  if (rlen > 0) {
    char* dst = x->opt->scratch ? (char*)x->opt->scratch + (j % 2) * x->seg : x->rbuf + j * x->seg;
    rc = hvds__p2p_irecv(x->p, x->from, dst, rlen, x->tag, &x->reqs[j % 2]);
  }
  if (rc == HVDS_SUCCESS && slen > 0)
    rc = hvds__p2p_isend(x->p, x->to, x->sbuf + j * x->seg, slen, x->tag, &x->reqs[2 + j % 2]);
  return rc;
}

/* Waits for segment j in both directions, then folds the received part into rbuf. */
static hvds_result_t seg_finish(seg_xfer_t* x, size_t j) {
  hvds_p2p_req_t* mine[2] = {x->reqs[j % 2], x->reqs[2 + j % 2]};
  x->reqs[j % 2] = x->reqs[2 + j % 2] = NULL;
  hvds_result_t rc = hvds__p2p_wait_all(x->p, mine, 2);
  size_t rlen = seg_len(x->rbytes, x->seg, j);
  if (rc != HVDS_SUCCESS || x->opt->scratch == NULL || rlen == 0) return rc;
  size_t esize = hvds__dtype_bytes(x->opt->dtype);
  const char* src = (const char*)x->opt->scratch + (j % 2) * x->seg;
  rc = hvds__reduce(x->rbuf + j * x->seg, src, rlen / esize, x->opt->dtype, x->opt->op);
  if (rc != HVDS_SUCCESS)
    snprintf(x->p->error, sizeof x->p->error, "reduce: op %d not supported for dtype %d",
             (int)x->opt->op, (int)x->opt->dtype);
  return rc;
}

hvds_result_t hvds__p2p_sendrecv_seg(hvds_p2p_t* p, int to, const void* sbuf, size_t sbytes,
                                     int from, void* rbuf, size_t rbytes, uint64_t tag,
                                     const hvds_p2p_seg_t* seg) {
  seg_xfer_t x = {p,
                  to,
                  from,
                  sbuf,
                  rbuf,
                  to < 0 ? 0 : sbytes,
                  from < 0 ? 0 : rbytes,
                  seg->seg_bytes,
                  tag,
                  seg,
                  {NULL, NULL, NULL, NULL}};
  size_t most = x.sbytes > x.rbytes ? x.sbytes : x.rbytes;
  if (most == 0) return HVDS_SUCCESS;
  if (x.seg == 0 || x.seg > most) x.seg = most;
  size_t nseg = (most + x.seg - 1) / x.seg;
  hvds_result_t rc = seg_post(&x, 0);
  for (size_t j = 0; j < nseg && rc == HVDS_SUCCESS; j++) {
    // Put segment j+1 on the wire before combining segment j.
    if (j + 1 < nseg) rc = seg_post(&x, j + 1);
    if (rc == HVDS_SUCCESS) rc = seg_finish(&x, j);
  }
  return hvds__p2p_finish(p, rc, x.reqs, 4);  // nothing is pending unless a step failed
}

int hvds__p2p_has_bell(const hvds_p2p_t* p) {
  return p != NULL && p->ops->bell_wait && p->ops->bell_ring && p->ops->bell_interrupt;
}

hvds_result_t hvds__p2p_bell_wait(hvds_p2p_t* p, uint64_t epoch) {
  return hvds__p2p_has_bell(p) ? p->ops->bell_wait(p, epoch) : HVDS_NOT_SUPPORTED;
}

hvds_result_t hvds__p2p_bell_ring(hvds_p2p_t* p, uint64_t epoch) {
  return hvds__p2p_has_bell(p) ? p->ops->bell_ring(p, epoch) : HVDS_NOT_SUPPORTED;
}

void hvds__p2p_bell_interrupt(hvds_p2p_t* p) {
  if (hvds__p2p_has_bell(p)) p->ops->bell_interrupt(p);
}

void hvds__p2p_abort(hvds_p2p_t* p) {
  if (p != NULL) p->ops->abort(p);
}

void hvds__p2p_destroy(hvds_p2p_t* p) {
  if (p != NULL) p->ops->destroy(p);
}
