/* The point-to-point interface (ops/p2p.h) over plain TCP, progressed in the calling thread.
 *
 * No thread of our own: every wait (and bell_wait) runs the progress engine (tcp_progress.c)
 * until its request completes, so a message costs no hand-off between threads. Sends are eager
 * (written at once, as far as the socket takes); receives are matched per (peer, tag) in the
 * order posted, and messages that arrive first are buffered (see tcp_internal.h for the wire).
 *
 * Failure model: a broken connection marks that peer dead; any operation that needs a dead
 * peer, a timeout, or abort() then fails the whole communicator with the first cause (p->error,
 * p->failed_peer), and shuts down every connection so that the peers blocked on this rank fail
 * within milliseconds. A failed communicator stays failed.
 */
#include "tcp_p2p.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "clock.h"
#include "log.h"
#include "tcp_internal.h"

static tcp_t* tcp_of(hvds_p2p_t* p) { return (tcp_t*)p->impl; }

static hvds_result_t failed_rc(tcp_t* t) {
  pthread_mutex_lock(&t->mu);
  hvds_result_t rc = t->fail_rc;
  pthread_mutex_unlock(&t->mu);
  return rc;
}

/* Removes r from whichever queue of its peer holds it (only after a failure). */
static void unlink_req(tcp_t* t, tcp_req_t* r) {
  tcp_peer_t* pe = &t->peers[r->peer];
  if (hvds__req_unlink(&pe->sendq, r) || hvds__req_unlink(&pe->posted, r)) return;
  if (pe->rx.req == r) { /* half received: the failed communicator never reads again */
    pe->rx.req = NULL;
    pe->rx.dst = NULL;
  }
}

/* Queues a send of a header (kind, tag) plus bytes of buf and writes what the socket takes. */
static void queue_send(tcp_t* t, tcp_req_t* r, uint64_t kind) {
  tcp_peer_t* pe = &t->peers[r->peer];
  r->is_send = 1;
  r->hdr[0] = r->tag;
  r->hdr[1] = kind << TCP_LEN_BITS | (uint64_t)r->bytes;
  hvds__req_append(&pe->sendq, r);
  if (pe->sendq.head == r) hvds__tcp_flush(t, r->peer); /* eager: nothing queued before it */
}

static hvds_result_t post(hvds_p2p_t* p, int peer, void* buf, size_t bytes, uint64_t tag,
                          int is_send, hvds_p2p_req_t** out) {
  if (out != NULL) *out = NULL;
  if (p == NULL || p->impl == NULL || out == NULL) return HVDS_INVALID_ARGUMENT;
  if (peer < 0 || peer >= p->size || peer == p->rank || (bytes > 0 && buf == NULL) ||
      (uint64_t)bytes > TCP_LEN_MASK) {
    return HVDS_INVALID_ARGUMENT;
  }
  tcp_t* t = tcp_of(p);
  if (atomic_load(&t->failed)) return failed_rc(t);
  tcp_peer_t* pe = &t->peers[peer];
  tcp_req_t* r = hvds__req_take(&t->idle);
  if (r == NULL) return hvds__tcp_fail(t, HVDS_SYSTEM_ERROR, peer, "out of memory for a request");
  r->peer = peer;
  r->tag = tag;
  r->buf = buf;
  r->bytes = bytes;
  hvds_result_t rc = HVDS_SUCCESS;
  if (is_send) {
    if (pe->dead) rc = hvds__tcp_fail(t, HVDS_REMOTE_ERROR, peer, "%s", pe->dead_msg);
    if (rc == HVDS_SUCCESS) queue_send(t, r, TCP_KIND_DATA);
  } else if (!hvds__tcp_match_unexpected(t, r, &rc) && rc == HVDS_SUCCESS &&
             !hvds__tcp_take_parked(t, r, &rc) && rc == HVDS_SUCCESS) {
    if (pe->dead) rc = hvds__tcp_fail(t, HVDS_REMOTE_ERROR, peer, "%s", pe->dead_msg);
    if (rc == HVDS_SUCCESS) hvds__req_append(&pe->posted, r);
  }
  if (rc != HVDS_SUCCESS) {
    hvds__req_release(&t->idle, r);
    return rc;
  }
  *out = r;
  return HVDS_SUCCESS;
}

static hvds_result_t tcp_isend(hvds_p2p_t* p, int peer, const void* buf, size_t bytes,
                               uint64_t tag, hvds_p2p_req_t** req) {
  return post(p, peer, (void*)buf, bytes, tag, 1, req);
}

static hvds_result_t tcp_irecv(hvds_p2p_t* p, int peer, void* buf, size_t bytes, uint64_t tag,
                               hvds_p2p_req_t** req) {
  return post(p, peer, buf, bytes, tag, 0, req);
}

/* Runs the engine until r is done, the communicator fails, r's peer dies, or ms pass (never
 * when forever). Leaves r linked where it was on failure. */
static hvds_result_t wait_done(tcp_t* t, tcp_req_t* r, int ms, int forever) {
  int64_t deadline = hvds__now_ms() + (forever ? 0 : ms);
  int polled = 0;
  double poll_until = t->poll_us > 0 ? hvds__now() + t->poll_us * 1e-6 : 0;
  while (!r->done && poll_until > 0) {
    if (atomic_load(&t->failed) || t->peers[r->peer].dead || hvds__now() >= poll_until) break;
    HVDS_CHECK(hvds__tcp_progress(t, 0));
  }
  while (!r->done) {
    if (atomic_load(&t->failed)) return failed_rc(t);
    tcp_peer_t* pe = &t->peers[r->peer];
    if (pe->dead) return hvds__tcp_fail(t, HVDS_REMOTE_ERROR, r->peer, "%s", pe->dead_msg);
    int left = -1;
    if (!forever) {
      int64_t l = deadline - hvds__now_ms();
      if (l <= 0 && polled) {
        return hvds__tcp_fail(t, HVDS_TIMEOUT, r->peer, "timed out after %d ms waiting for rank %d",
                              ms, r->peer);
      }
      left = l < 0 ? 0 : (l > INT_MAX ? INT_MAX : (int)l);
    }
    HVDS_CHECK(hvds__tcp_progress(t, left));
    polled = 1;
  }
  return HVDS_SUCCESS;
}

static hvds_result_t tcp_wait(hvds_p2p_t* p, hvds_p2p_req_t* req, int timeout_ms) {
  if (p == NULL || p->impl == NULL || req == NULL) return HVDS_INVALID_ARGUMENT;
  tcp_t* t = tcp_of(p);
  int ms = timeout_ms < 0 ? p->timeout_ms : timeout_ms;
  hvds_result_t rc = wait_done(t, req, ms, timeout_ms < 0 && ms <= 0);
  if (!req->done) unlink_req(t, req);
  hvds__req_release(&t->idle, req);
  return rc;
}

static void tcp_abort(hvds_p2p_t* p) {
  if (p == NULL || p->impl == NULL) return;
  hvds__tcp_fail(tcp_of(p), HVDS_SHUT_DOWN, -1, "communicator aborted on this rank");
}

static void free_peer(tcp_peer_t* pe) {
  if (pe->fd >= 0) {
    // Send our FIN after everything queued, then drop unread input so close() sends no reset
    // that could destroy data the peer has not read yet.
    shutdown(pe->fd, SHUT_WR);
    char sink[4096];
    for (int i = 0; i < 64 && read(pe->fd, sink, sizeof sink) > 0; i++) {
    }
    close(pe->fd);
  }
  hvds__ux_clear(&pe->unexpected);
  free(pe->rx.stage);
}

/* Frees everything of t; tolerates a partly built t. */
static void tcp_free(tcp_t* t) {
  if (t == NULL) return;
  if (t->peers != NULL)
    for (int i = 0; i < t->p->size; i++) free_peer(&t->peers[i]);
  hvds__req_pool_clear(&t->idle);
  if (t->event_fd >= 0) close(t->event_fd);
  pthread_mutex_destroy(&t->mu);
  free(t->peers);
  free(t->pfds);
  free(t->pfd_peer);
  free(t);
}

static void tcp_destroy(hvds_p2p_t* p) {
  if (p == NULL) return;
  tcp_free(tcp_of(p));
  free(p);
}

static hvds_result_t tcp_bell_wait(hvds_p2p_t* p, uint64_t epoch) {
  tcp_t* t = tcp_of(p);
  for (;;) {
    if (atomic_load(&t->failed)) return failed_rc(t);
    if (atomic_exchange(&t->interrupt, 0)) return HVDS_IN_PROGRESS;
    if (t->bell_max >= epoch) return HVDS_SUCCESS; /* older rings were for cycles already run */
    for (int i = 0; i < p->size; i++) {
      if (t->peers[i].dead) return hvds__tcp_fail(t, HVDS_REMOTE_ERROR, i, "%s", t->peers[i].dead_msg);
    }
    hvds_result_t rc = hvds__tcp_unpark_all(t); /* a ring may sit behind a parked payload */
    if (rc == HVDS_SUCCESS) rc = hvds__tcp_progress(t, -1);
    if (rc != HVDS_SUCCESS) return rc;
  }
}

static hvds_result_t tcp_bell_ring(hvds_p2p_t* p, uint64_t epoch) {
  tcp_t* t = tcp_of(p);
  if (atomic_load(&t->failed)) return failed_rc(t);
  hvds_result_t rc = HVDS_SUCCESS;
  tcp_req_t** reqs = calloc((size_t)p->size, sizeof *reqs); /* reqs[i]: the ring to rank i */
  if (reqs == NULL) return hvds__tcp_fail(t, HVDS_SYSTEM_ERROR, -1, "out of memory");
  for (int i = 0; i < p->size && rc == HVDS_SUCCESS; i++) {
    if (i == p->rank) continue;
    if (t->peers[i].dead) {
      rc = hvds__tcp_fail(t, HVDS_REMOTE_ERROR, i, "%s", t->peers[i].dead_msg);
      break;
    }
    reqs[i] = hvds__req_take(&t->idle);
    if (reqs[i] == NULL) {
      rc = hvds__tcp_fail(t, HVDS_SYSTEM_ERROR, i, "out of memory for a request");
      break;
    }
    reqs[i]->peer = i;
    reqs[i]->tag = epoch;
    queue_send(t, reqs[i], TCP_KIND_BELL);
  }
  // Rings are eager; wait only until every one is handed to the kernel.
  int ms = p->timeout_ms;
  for (int i = 0; i < p->size; i++) {
    if (reqs[i] == NULL) continue;
    if (rc == HVDS_SUCCESS) rc = wait_done(t, reqs[i], ms, ms <= 0);
    if (!reqs[i]->done) unlink_req(t, reqs[i]);
    hvds__req_release(&t->idle, reqs[i]);
  }
  free(reqs);
  return rc;
}

static void tcp_bell_interrupt(hvds_p2p_t* p) {
  if (p == NULL || p->impl == NULL) return;
  tcp_t* t = tcp_of(p);
  atomic_store(&t->interrupt, 1);
  hvds__tcp_wake(t);
}

static const hvds_p2p_ops_t kTcpOps = {
    1,         "tcp",      tcp_isend,     tcp_irecv,     tcp_wait,
    tcp_abort, tcp_destroy, tcp_bell_wait, tcp_bell_ring, tcp_bell_interrupt,
};

/* Allocates the per-rank state (no connections yet). */
static tcp_t* tcp_alloc(hvds_p2p_t* p) {
  tcp_t* t = calloc(1, sizeof *t);
  if (t == NULL) return NULL;
  t->p = p;
  t->event_fd = -1;
  pthread_mutex_init(&t->mu, NULL);
  atomic_init(&t->failed, 0);
  atomic_init(&t->interrupt, 0);
  t->peers = calloc((size_t)p->size, sizeof *t->peers);
  t->pfds = calloc((size_t)p->size + 1, sizeof *t->pfds);
  t->pfd_peer = calloc((size_t)p->size + 1, sizeof *t->pfd_peer);
  t->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  int ok = t->peers != NULL && t->pfds != NULL && t->pfd_peer != NULL && t->event_fd >= 0;
  for (int i = 0; ok && i < p->size; i++) {
    t->peers[i].fd = -1;
    if (i == p->rank) continue;
    t->peers[i].rx.stage = malloc(TCP_STAGE_BYTES);
    ok = t->peers[i].rx.stage != NULL;
  }
  if (!ok) {
    tcp_free(t);
    return NULL;
  }
  return t;
}

void hvds__tcp_p2p_set_poll_us(hvds_p2p_t* p, int us) {
  if (p != NULL && p->ops == &kTcpOps && p->impl != NULL) tcp_of(p)->poll_us = us > 0 ? us : 0;
}

hvds_result_t hvds__tcp_p2p_create(const hvds_kv_t* kv, const char* prefix, int rank, int size,
                                   const char* iface, const char* hostname, int timeout_ms,
                                   hvds_p2p_t** out, char* err, size_t errlen) {
  if (err != NULL && errlen > 0) err[0] = '\0';
  if (out == NULL) return HVDS_INVALID_ARGUMENT;
  *out = NULL;
  if (kv == NULL || kv->set == NULL || kv->get == NULL || size < 1 || rank < 0 || rank >= size) {
    if (err != NULL && errlen > 0) snprintf(err, errlen, "tcp connect: invalid argument");
    return HVDS_INVALID_ARGUMENT;
  }
  hvds_p2p_t* p = calloc(1, sizeof *p);
  if (p == NULL) return HVDS_SYSTEM_ERROR;
  p->rank = rank;
  p->size = size;
  p->timeout_ms = timeout_ms;
  p->ops = &kTcpOps;
  p->failed_peer = -1;
  tcp_t* t = tcp_alloc(p);
  if (t == NULL) {
    if (err != NULL && errlen > 0) snprintf(err, errlen, "tcp connect: out of memory");
    free(p);
    return HVDS_SYSTEM_ERROR;
  }
  if (size > 1) {
    hvds_result_t rc =
        hvds__tcp_connect_mesh(t, kv, prefix, iface, hostname, timeout_ms, err, errlen);
    if (rc != HVDS_SUCCESS) {
      tcp_free(t);
      free(p);
      return rc;
    }
  }
  p->impl = t;
  *out = p;
  return HVDS_SUCCESS;
}
