/* The progress engine of the shared-memory transport: runs in the communicator's thread only.
 *
 * Sends: the head of each peer's send queue is copied into the pair's ring (record header,
 * then the payload in slices of SHM_SLICE, head published after each so that the consumer
 * copies one slice out while the next goes in). Receives: a record header is matched against
 * the oldest posted receive with its tag (FIFO per peer and tag) and its payload is copied
 * straight into that buffer. Without a receive a small payload is copied into an unexpected
 * message; a large one is left in the ring (parked) until a receive for it, or for anything
 * else from that peer, is posted, so it usually lands in its buffer with no extra copy.
 * Every publish of head or tail wakes the other side if it sleeps.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "copy.h"
#include "log.h"
#include "shm_internal.h"

#define ALIGN_REC(x) (((x) + SHM_REC_BYTES - 1) / SHM_REC_BYTES * SHM_REC_BYTES)

static void ring_write(char* data, size_t cap, uint64_t pos, const void* src, size_t n) {
  size_t off = (size_t)(pos % cap), first = cap - off < n ? cap - off : n;
  hvds__copy(data + off, src, first);
  if (n > first) hvds__copy(data, (const char*)src + first, n - first);
}

static void ring_read(const char* data, size_t cap, uint64_t pos, void* dst, size_t n) {
  size_t off = (size_t)(pos % cap), first = cap - off < n ? cap - off : n;
  hvds__copy(dst, data + off, first);
  if (n > first) hvds__copy((char*)dst + first, data, n - first);
}

/* Makes new bytes visible to the consumer q and wakes it if it sleeps. */
static void publish_head(shm_t* s, int q, uint64_t head) {
  shm_peer_t* pe = &s->peers[q];
  pe->out_head = head;
  atomic_store_explicit(&pe->out->head, head, memory_order_release);
  atomic_thread_fence(memory_order_seq_cst);  // before reading q's sleeping flag
  hvds__shm_wake(s, q, 0);
}

/* Gives ring space back to the producer q and wakes it if it sleeps. */
static void publish_tail(shm_t* s, int q, uint64_t tail) {
  shm_peer_t* pe = &s->peers[q];
  pe->in_tail = tail;
  atomic_store_explicit(&pe->in->tail, tail, memory_order_release);
  atomic_thread_fence(memory_order_seq_cst);
  hvds__shm_wake(s, q, 0);
}

/* Writes as much of peer q's send queue as the ring takes. */
static long pump_send(shm_t* s, int q) {
  shm_peer_t* pe = &s->peers[q];
  size_t cap = s->ring_bytes;
  long moved = 0;
  shm_req_t* r;
  while ((r = pe->sendq.head) != NULL) {
    uint64_t head = pe->out_head;
    uint64_t tail = atomic_load_explicit(&pe->out->tail, memory_order_acquire);
    size_t room = cap - (size_t)(head - tail);
    if (!r->hdr_written) {
      if (room < SHM_REC_BYTES) break;
      uint64_t rec[SHM_REC_BYTES / 8] = {r->tag, (uint64_t)r->bytes};
      ring_write(pe->out_data, cap, head, rec, SHM_REC_BYTES);
      head += SHM_REC_BYTES;
      room -= SHM_REC_BYTES;
      r->hdr_written = 1;
      moved++;
    }
    while (r->sent < r->bytes && room > 0) {
      size_t n = r->bytes - r->sent;
      if (n > room) n = room;
      if (n > SHM_SLICE) n = SHM_SLICE;
      ring_write(pe->out_data, cap, head, r->buf + r->sent, n);
      head += n;
      room -= n;
      r->sent += n;
      moved += (long)n;
      if (r->sent < r->bytes) publish_head(s, q, head);  // the consumer may start on it
    }
    if (r->sent < r->bytes) {
      publish_head(s, q, head);
      break;
    }
    publish_head(s, q, ALIGN_REC(head));  // padding to the next record always fits
    r->done = 1;
    hvds__req_pop(&pe->sendq);
  }
  return moved;
}

/* A header from q found no receive: its payload goes into a new unexpected message. */
static int stash_unexpected(shm_t* s, int q, uint64_t tag, size_t len) {
  shm_peer_t* pe = &s->peers[q];
  if (s->ux_bytes + len > SHM_UNEXPECTED_MAX) {
    hvds__shm_fail(s, HVDS_SYSTEM_ERROR, q,
                   "rank %d sent %zu bytes with tag %llu before any receive for it, and %zu bytes "
                   "of such messages are already buffered (limit %zu)",
                   q, len, (unsigned long long)tag, s->ux_bytes, SHM_UNEXPECTED_MAX);
    return -1;
  }
  hvds_ux_t* ux = hvds__ux_push(&pe->unexpected, tag, len);
  if (ux == NULL) {
    hvds__shm_fail(s, HVDS_SYSTEM_ERROR, q, "out of memory for a %zu-byte message from rank %d",
                   len, q);
    return -1;
  }
  s->ux_bytes += len;
  pe->rx.ux = ux;
  pe->rx.dst = ux->data;
  return 0;
}

/* Reads the record header at tail and decides where its payload goes. Returns 1 when it was
 * consumed, 0 when it stays (parked), -1 on failure. */
static int on_header(shm_t* s, int q, uint64_t tail) {
  shm_peer_t* pe = &s->peers[q];
  uint64_t rec[2];
  ring_read(pe->in_data, s->ring_bytes, tail, rec, sizeof rec);
  uint64_t tag = rec[0];
  size_t len = (size_t)rec[1];
  shm_rx_t* rx = &pe->rx;
  shm_req_t* r = hvds__req_take_tag(&pe->posted, tag);
  if (r != NULL) {
    if (r->bytes != len) {
      hvds__shm_fail(s, HVDS_PRECONDITION_ERROR, q,
                     "rank %d sent %zu bytes with tag %llu, but rank %d's receive expects %zu "
                     "bytes",
                     q, len, (unsigned long long)tag, s->p->rank, r->bytes);
      return -1;
    }
    rx->req = r;
    rx->dst = r->buf;
  } else if (len >= SHM_PARK_MIN && pe->posted.head == NULL) {
    return 0;  // nobody waits on this peer: leave it where it is
  } else if (stash_unexpected(s, q, tag, len) != 0) {
    return -1;
  }
  rx->active = 1;
  rx->tag = tag;
  rx->len = len;
  rx->got = 0;
  return 1;
}

static void payload_done(shm_rx_t* rx) {
  if (rx->req != NULL) rx->req->done = 1;
  if (rx->ux != NULL) rx->ux->complete = 1;
  rx->req = NULL;
  rx->ux = NULL;
  rx->dst = NULL;
  rx->active = 0;
}

/* Reads whatever peer q has published. */
static long pump_recv(shm_t* s, int q) {
  shm_peer_t* pe = &s->peers[q];
  shm_rx_t* rx = &pe->rx;
  size_t cap = s->ring_bytes;
  long moved = 0;
  for (;;) {
    uint64_t head = atomic_load_explicit(&pe->in->head, memory_order_acquire);
    uint64_t tail = pe->in_tail;
    if (!rx->active) {
      if (head - tail < SHM_REC_BYTES) break;
      int h = on_header(s, q, tail);
      if (h < 0) return -1;
      if (h == 0) break;
      tail += SHM_REC_BYTES;
      moved++;
    }
    size_t n = (size_t)(head - tail), want = rx->len - rx->got;
    if (n > want) n = want;
    if (n > SHM_SLICE) n = SHM_SLICE;
    if (n > 0) {
      ring_read(pe->in_data, cap, tail, rx->dst + rx->got, n);
      rx->got += n;
      tail += n;
      moved += (long)n;
    }
    if (rx->got == rx->len) {
      payload_done(rx);
      tail = ALIGN_REC(tail);
      moved++;
    }
    if (tail != pe->in_tail) publish_tail(s, q, tail);
    if (rx->active && n == 0) break;  // waiting for the producer
  }
  return moved;
}

long hvds__shm_progress(shm_t* s) {
  long moved = 0;
  for (int q = 0; q < s->p->size; q++) {
    if (q == s->p->rank) continue;
    long a = pump_recv(s, q);
    long b = a < 0 ? -1 : pump_send(s, q);
    if (a < 0 || b < 0) return -1;
    moved += a + b;
  }
  return moved;
}

long hvds__shm_pump_send(shm_t* s, int q) { return pump_send(s, q); }

int hvds__shm_match_unexpected(shm_t* s, shm_req_t* r) {
  shm_peer_t* pe = &s->peers[r->peer];
  hvds_ux_t* ux = hvds__ux_find(&pe->unexpected, r->tag);
  if (ux == NULL) return 0;
  if (ux->len != r->bytes) {
    hvds__shm_fail(s, HVDS_PRECONDITION_ERROR, r->peer,
                   "rank %d sent %zu bytes with tag %llu, but rank %d's receive expects %zu "
                   "bytes",
                   r->peer, ux->len, (unsigned long long)ux->tag, s->p->rank, r->bytes);
    return 0;
  }
  size_t have = ux->complete ? ux->len : pe->rx.got;
  if (have > 0) hvds__copy(r->buf, ux->data, have);
  if (ux->complete) {
    r->done = 1;
  } else {  // the message being read: the rest goes straight to the receive
    pe->rx.ux = NULL;
    pe->rx.req = r;
    pe->rx.dst = r->buf;
  }
  s->ux_bytes -= ux->len;
  hvds__ux_drop(&pe->unexpected, ux);
  return 1;
}
