/* The point-to-point interface (ops/p2p.h) over shared memory, progressed in the calling thread.
 *
 * No thread of our own: every wait runs the progress engine (shm_progress.c) over every pair
 * until its request completes. A wait polls for poll_us (yielding the processor between looks
 * when the host has fewer cores than ranks), then sleeps on its futex word; whoever publishes
 * bytes or frees ring space for a sleeping rank bumps that word and wakes it. Sends are eager:
 * a send completes once its last byte is in the ring.
 *
 * Failure model: a wait that times out, finds its peer dead (shm_seg.c: liveness lock and pid),
 * or meets a size mismatch fails the communicator with the first cause (p->error,
 * p->failed_peer), and publishes the failure in the segment's header: every peer's wait then
 * fails at once, naming this rank and its reason. abort() does the same. A failed communicator
 * stays failed.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "clock.h"
#include "cpu_budget.h"
#include "log.h"
#include "shm_internal.h"

#define DEFAULT_RING_BUDGET ((size_t)256 << 20)

#if defined(__x86_64__) || defined(__i386__)
#define CPU_RELAX() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ __volatile__("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

static shm_t* shm_of(hvds_p2p_t* p) { return (shm_t*)p->impl; }

size_t hvds__shm_ring_default(int size) {
  size_t pairs = size > 1 ? (size_t)size * (size_t)(size - 1) : 1;
  size_t ring = (size_t)1 << 20;
  while (ring > ((size_t)64 << 10) && ring * pairs > DEFAULT_RING_BUDGET) ring /= 2;
  return ring;
}

/* Cores the ranks of this host can keep busy: the affinity mask, capped by a container's CPU
 * quota (cpu_budget.h). */
static int online_cpus(void) { return hvds__cpu_budget().cores; }

size_t hvds__shm_coll_default(int size) {
  size_t each = ((size_t)32 << 20) / (size_t)(size > 0 ? size : 1);
  if (each > ((size_t)8 << 20)) each = (size_t)8 << 20;
  if (each < ((size_t)1 << 20)) each = (size_t)1 << 20;
  return each;
}

int hvds__shm_poll_default(int size) { return size <= online_cpus() ? 50 : 0; }

/* With more ranks than cores the waits yield while they poll, so a longer poll costs the peers
 * little and spares a futex round trip per stage (np 4 on 2 cores, 64 KiB: 30 us against 50). */
int hvds__shm_coll_poll_default(int size) { return size <= online_cpus() ? 50 : 300; }

static hvds_result_t failed_rc(shm_t* s) {
  pthread_mutex_lock(&s->mu);
  hvds_result_t rc = s->fail_rc;
  pthread_mutex_unlock(&s->mu);
  return rc;
}

hvds_result_t hvds__shm_check_remote(shm_t* s) {
  if (atomic_load(&s->failed)) return failed_rc(s);
  int32_t f = atomic_load_explicit(&s->hdr->failed, memory_order_acquire);
  if (f == 0 || f - 1 == s->p->rank) return HVDS_SUCCESS;
  // The rank that failed is the peer this one lost (as a closed connection is over TCP); its
  // reason names whom it lost in turn, which is how the runtime follows the chain to the root.
  int who = f - 1;
  return hvds__shm_fail(s, HVDS_REMOTE_ERROR, who, "rank %d failed: %.300s", who, s->ctrl[who].why);
}

/* Removes r from whichever queue of its peer holds it (only after a failure). */
static void unlink_req(shm_t* s, shm_req_t* r) {
  shm_peer_t* pe = &s->peers[r->peer];
  if (hvds__req_unlink(&pe->sendq, r) || hvds__req_unlink(&pe->posted, r)) return;
  if (pe->rx.req == r) { /* half received: the failed communicator never reads again */
    pe->rx.req = NULL;
    pe->rx.dst = NULL;
  }
}

static hvds_result_t post(hvds_p2p_t* p, int peer, void* buf, size_t bytes, uint64_t tag,
                          int is_send, hvds_p2p_req_t** out) {
  if (out != NULL) *out = NULL;
  if (p == NULL || p->impl == NULL || out == NULL) return HVDS_INVALID_ARGUMENT;
  if (peer < 0 || peer >= p->size || peer == p->rank || (bytes > 0 && buf == NULL))
    return HVDS_INVALID_ARGUMENT;
  shm_t* s = shm_of(p);
  hvds_result_t rc = hvds__shm_check_remote(s);
  if (rc != HVDS_SUCCESS) return rc;
  shm_req_t* r = hvds__req_take(&s->idle);
  if (r == NULL) return hvds__shm_fail(s, HVDS_SYSTEM_ERROR, -1, "out of memory for a request");
  r->peer = peer;
  r->tag = tag;
  r->buf = buf;
  r->bytes = bytes;
  r->is_send = is_send;
  shm_peer_t* pe = &s->peers[peer];
  if (is_send) {
    hvds__req_append(&pe->sendq, r);
    if (pe->sendq.head == r && hvds__shm_pump_send(s, peer) < 0) rc = failed_rc(s); /* eager */
  } else if (!hvds__shm_match_unexpected(s, r)) {
    if (atomic_load(&s->failed)) rc = failed_rc(s);
    if (rc == HVDS_SUCCESS) hvds__req_append(&pe->posted, r);
  }
  if (rc != HVDS_SUCCESS) {
    unlink_req(s, r);
    hvds__req_release(&s->idle, r);
    return rc;
  }
  *out = r;
  return HVDS_SUCCESS;
}

static hvds_result_t shm_isend(hvds_p2p_t* p, int peer, const void* buf, size_t bytes, uint64_t tag,
                               hvds_p2p_req_t** req) {
  return post(p, peer, (void*)buf, bytes, tag, 1, req);
}

static hvds_result_t shm_irecv(hvds_p2p_t* p, int peer, void* buf, size_t bytes, uint64_t tag,
                               hvds_p2p_req_t** req) {
  return post(p, peer, buf, bytes, tag, 0, req);
}

/* After a sleep: fails when r can never complete because its peer died (checked when
 * check_dead) or closed. */
static hvds_result_t check_peer(shm_t* s, shm_req_t* r, int check_dead) {
  int q = r->peer;
  int dead = check_dead && hvds__shm_peer_dead(s, q);
  if (!dead && atomic_load(&s->ctrl[q].state) != SHM_STATE_CLOSED) return HVDS_SUCCESS;
  // A peer that went may have left its last messages in the ring: only an empty wait is
  // hopeless (its state is read first, so everything it published before is visible).
  shm_peer_t* pe = &s->peers[q];
  if (hvds__shm_progress(s) != 0 || r->done) return HVDS_SUCCESS;
  int stuck = r->is_send ? 1 : atomic_load(&pe->in->head) == pe->in_tail && !pe->rx.active;
  if (!stuck) return HVDS_SUCCESS;
  if (dead)
    return hvds__shm_fail(s, HVDS_REMOTE_ERROR, q,
                          "rank %d (pid %d) exited without closing the shared memory communicator",
                          q, (int)atomic_load(&s->ctrl[q].pid));
  return hvds__shm_fail(s, HVDS_REMOTE_ERROR, q,
                        "rank %d closed the shared memory communicator while rank %d waited to %s "
                        "%zu bytes with tag %llu",
                        q, s->p->rank, r->is_send ? "send it" : "receive from it", r->bytes,
                        (unsigned long long)r->tag);
}

/* Sleeps until woken or the liveness interval (or what is left of ms) passes. Returns
 * HVDS_TIMEOUT when the deadline passed, else HVDS_SUCCESS (look again). */
static hvds_result_t sleep_once(shm_t* s, shm_req_t* r, int64_t deadline_us, int* done) {
  uint32_t seq = atomic_load(&s->me->wake_seq);
  atomic_store(&s->me->sleeping, 1);  // seq_cst: publishers see it or we see their bytes
  long n = hvds__shm_progress(s);
  hvds_result_t rc = HVDS_SUCCESS;
  if (n == 0 && !r->done && atomic_load(&s->hdr->failed) == 0) {
    int64_t ms = SHM_LIVENESS_MS;
    if (deadline_us > 0) {
      int64_t left = (deadline_us - hvds__now_us()) / 1000;
      if (left <= 0) rc = HVDS_TIMEOUT;
      if (left < ms) ms = left;
    }
    if (rc == HVDS_SUCCESS) hvds__shm_sleep(s, seq, (int)(ms > 0 ? ms : 1));
  }
  atomic_store(&s->me->sleeping, 0);
  *done = n < 0;
  return rc;
}

/* Runs the engine until r is done, the communicator fails, or ms pass (never when forever).
 * Only a wait for a small message polls: a large one takes long anyway, and a rank that polls
 * (even yielding) keeps a processor its peers need for copying when there are fewer cores than
 * ranks; it sleeps and is woken slice by slice. */
static hvds_result_t wait_done(shm_t* s, shm_req_t* r, int ms, int forever) {
  int64_t deadline = forever ? 0 : hvds__now_us() + (int64_t)ms * 1000;
  int poll_us = r->bytes <= SHM_POLL_MAX_BYTES ? s->poll_us : 0;
  int64_t poll_until = hvds__now_us() + poll_us, last_check = hvds__now_us();
  for (;;) {
    hvds_result_t rc = hvds__shm_check_remote(s);
    if (rc != HVDS_SUCCESS) return rc;
    long n = hvds__shm_progress(s);
    if (n < 0) return failed_rc(s);
    if (r->done) return HVDS_SUCCESS;
    if (n > 0 || hvds__now_us() < poll_until) {
      if (n > 0) poll_until = hvds__now_us() + poll_us;
      if (n == 0 && s->yield) sched_yield();
      if (n == 0 && !s->yield) CPU_RELAX();
      continue;
    }
    int broke = 0;
    rc = sleep_once(s, r, deadline, &broke);
    if (broke) return failed_rc(s);
    if (r->done) return HVDS_SUCCESS;
    hvds_result_t remote = hvds__shm_check_remote(s);  // a published failure explains the rest
    if (remote != HVDS_SUCCESS) return remote;
    if (rc == HVDS_TIMEOUT)
      return hvds__shm_fail(s, HVDS_TIMEOUT, r->peer, "timed out after %d ms waiting for rank %d",
                            ms, r->peer);
    int check_dead = hvds__now_us() - last_check >= SHM_LIVENESS_MS * 1000;
    if (check_dead) last_check = hvds__now_us();
    if ((rc = check_peer(s, r, check_dead)) != HVDS_SUCCESS) return rc;
    poll_until = hvds__now_us() + poll_us;
  }
}

static hvds_result_t shm_wait(hvds_p2p_t* p, hvds_p2p_req_t* req, int timeout_ms) {
  if (p == NULL || p->impl == NULL || req == NULL) return HVDS_INVALID_ARGUMENT;
  shm_t* s = shm_of(p);
  int ms = timeout_ms < 0 ? p->timeout_ms : timeout_ms;
  hvds_result_t rc = req->done ? HVDS_SUCCESS : wait_done(s, req, ms, timeout_ms < 0 && ms <= 0);
  if (!req->done) unlink_req(s, req);
  hvds__req_release(&s->idle, req);
  return rc;
}

static void shm_abort(hvds_p2p_t* p) {
  if (p == NULL || p->impl == NULL) return;
  hvds__shm_fail(shm_of(p), HVDS_SHUT_DOWN, -1, "communicator aborted on rank %d", p->rank);
}

/* Frees everything of s; tolerates a partly built s. */
static void shm_free(shm_t* s) {
  if (s == NULL) return;
  hvds__shm_seg_close(s);
  if (s->peers != NULL)
    for (int q = 0; q < s->p->size; q++) hvds__ux_clear(&s->peers[q].unexpected);
  hvds__req_pool_clear(&s->idle);
  pthread_mutex_destroy(&s->mu);
  free(s->peers);
  free(s);
}

static void shm_destroy(hvds_p2p_t* p) {
  if (p == NULL) return;
  shm_free(shm_of(p));
  free(p);
}

/* Any attached peer that died fails the communicator (checked while idle on the doorbell). */
static hvds_result_t check_all_peers(shm_t* s) {
  for (int q = 0; q < s->p->size; q++) {
    if (q != s->p->rank && hvds__shm_peer_dead(s, q))
      return hvds__shm_fail(s, HVDS_REMOTE_ERROR, q,
                            "rank %d (pid %d) exited without closing the shared memory "
                            "communicator",
                            q, (int)atomic_load(&s->ctrl[q].pid));
  }
  return HVDS_SUCCESS;
}

static hvds_result_t shm_bell_wait(hvds_p2p_t* p, uint64_t epoch) {
  shm_t* s = shm_of(p);
  int64_t last_check = 0;  // peers' liveness: at the first sleep, then every SHM_LIVENESS_MS
  for (;;) {
    hvds_result_t rc = hvds__shm_check_remote(s);
    if (rc != HVDS_SUCCESS) return rc;
    if (atomic_exchange(&s->interrupt, 0)) return HVDS_IN_PROGRESS;
    if (atomic_load(&s->me->bell) >= epoch) return HVDS_SUCCESS; /* older rings are stale */
    if (hvds__shm_progress(s) < 0) return failed_rc(s);
    uint32_t seq = atomic_load(&s->me->wake_seq);
    atomic_store(&s->me->sleeping, 1);
    if (!atomic_load(&s->interrupt) && atomic_load(&s->me->bell) < epoch &&
        atomic_load(&s->hdr->failed) == 0)
      hvds__shm_sleep(s, seq, SHM_LIVENESS_MS);
    atomic_store(&s->me->sleeping, 0);
    if ((rc = hvds__shm_check_remote(s)) != HVDS_SUCCESS) return rc;
    if (hvds__now_us() - last_check >= SHM_LIVENESS_MS * 1000) {
      last_check = hvds__now_us();
      if ((rc = check_all_peers(s)) != HVDS_SUCCESS) return rc;
    }
  }
}

static hvds_result_t shm_bell_ring(hvds_p2p_t* p, uint64_t epoch) {
  shm_t* s = shm_of(p);
  HVDS_CHECK(hvds__shm_check_remote(s));
  for (int q = 0; q < p->size; q++) {
    if (q == p->rank) continue;
    uint64_t old = atomic_load(&s->ctrl[q].bell);
    while (old < epoch && !atomic_compare_exchange_weak(&s->ctrl[q].bell, &old, epoch)) {
    }
    hvds__shm_wake(s, q, 0);
  }
  return HVDS_SUCCESS;
}

static void shm_bell_interrupt(hvds_p2p_t* p) {
  if (p == NULL || p->impl == NULL) return;
  shm_t* s = shm_of(p);
  atomic_store(&s->interrupt, 1);
  if (s->me != NULL) hvds__shm_wake(s, p->rank, 1);
}

static const hvds_p2p_ops_t kShmOps = {
    1,         "shm",       shm_isend,     shm_irecv,     shm_wait,
    shm_abort, shm_destroy, shm_bell_wait, shm_bell_ring, shm_bell_interrupt,
};

int hvds__shm_p2p_is(const hvds_p2p_t* p) { return p != NULL && p->ops == &kShmOps; }

static shm_t* shm_alloc(hvds_p2p_t* p) {
  shm_t* s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  s->p = p;
  s->fd = -1;
  pthread_mutex_init(&s->mu, NULL);
  atomic_init(&s->failed, 0);
  atomic_init(&s->interrupt, 0);
  s->peers = calloc((size_t)p->size, sizeof *s->peers);
  if (s->peers == NULL) {
    shm_free(s);
    return NULL;
  }
  return s;
}

hvds_result_t hvds__shm_p2p_create_opts(const hvds_kv_t* kv, const char* prefix, int rank, int size,
                                        int timeout_ms, const hvds_shm_options_t* o,
                                        hvds_p2p_t** out, char* err, size_t errlen) {
  char scratch[8];
  if (err == NULL || errlen == 0) err = scratch, errlen = sizeof scratch;
  err[0] = '\0';
  if (out == NULL) return HVDS_INVALID_ARGUMENT;
  *out = NULL;
  if (kv == NULL || kv->set == NULL || kv->get == NULL || prefix == NULL || size < 1 || rank < 0 ||
      rank >= size) {
    snprintf(err, errlen, "shm create: invalid argument");
    return HVDS_INVALID_ARGUMENT;
  }
  size_t ring = o != NULL && o->ring_bytes > 0 ? o->ring_bytes : hvds__shm_ring_default(size);
  ring = ring < 4096 ? 4096 : ring / SHM_REC_BYTES * SHM_REC_BYTES;
  hvds_p2p_t* p = calloc(1, sizeof *p);
  if (p != NULL)
    *p = (hvds_p2p_t){
        .rank = rank, .size = size, .timeout_ms = timeout_ms, .ops = &kShmOps, .failed_peer = -1};
  shm_t* s = p != NULL ? shm_alloc(p) : NULL;
  if (s == NULL) {
    free(p);
    snprintf(err, errlen, "shm create: out of memory");
    return HVDS_SYSTEM_ERROR;
  }
  p->impl = s;
  s->poll_us = o != NULL && o->poll_us >= 0 ? o->poll_us : hvds__shm_poll_default(size);
  s->coll_poll_us = o != NULL && o->poll_us >= 0 ? o->poll_us : hvds__shm_coll_poll_default(size);
  s->yield = size > online_cpus();
  hvds__store_choice_init(&s->store);
  size_t coll = o != NULL && o->coll_bytes > 0 ? o->coll_bytes : hvds__shm_coll_default(size);
  coll = coll < 4096 ? 4096 : coll / 128 * 128;
  hvds_result_t rc = hvds__shm_seg_open(s, kv, prefix, ring, coll, timeout_ms, err, errlen);
  if (rc != HVDS_SUCCESS) {
    shm_free(s);
    free(p);
    return rc;
  }
  *out = p;
  return HVDS_SUCCESS;
}

hvds_result_t hvds__shm_p2p_create(const hvds_kv_t* kv, const char* prefix, int rank, int size,
                                   const char* iface, const char* hostname, int timeout_ms,
                                   hvds_p2p_t** out, char* err, size_t errlen) {
  (void)iface;
  (void)hostname;
  return hvds__shm_p2p_create_opts(kv, prefix, rank, size, timeout_ms, NULL, out, err, errlen);
}

void hvds__shm_p2p_crash_for_test(hvds_p2p_t* p) {
  if (p == NULL || p->ops != &kShmOps) return;
  shm_t* s = shm_of(p);
  s->crashed = 1;  // close leaves the state ALIVE, as a crash would
  shm_free(s);
  free(p);
}
