/* The progress engine of the TCP transport: runs in the calling thread, the one running this
 * communicator's collectives (the coordinator, or a caller that runs the cycle while it waits).
 *
 * Sends are eager: a send is queued on its peer and written as far as the socket takes; the rest
 * is written whenever poll() finds the socket writable. Reads go through a per-peer staging
 * buffer, except that a payload with a known destination is read straight into it (readv of the
 * payload's remainder plus the staging buffer, so one call also fetches the next headers). A
 * header is matched against the oldest posted receive with its tag (FIFO per peer and tag);
 * without one a small payload is kept as an unexpected message until a receive asks for it,
 * and a large one is parked: the engine stops reading that peer, so the payload waits in the
 * kernel and lands straight in the receive's buffer once it is posted (no second copy).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "check.h"
#include "log.h"
#include "tcp_internal.h"

#define MAX_IOV 64

void hvds__tcp_peer_died(tcp_t* t, int peer, int err) {
  tcp_peer_t* pe = &t->peers[peer];
  if (pe->dead) return;
  pe->dead = 1;
  snprintf(pe->dead_msg, sizeof pe->dead_msg, "rank %d (%s): connection closed: %s", peer,
           pe->addr, err == 0 ? "end of file (the peer closed it)" : strerror(err));
  HVDS_DEBUG("tcp p2p rank %d: %s", t->p->rank, pe->dead_msg);
}

static void payload_done(tcp_rx_t* rx) {
  if (rx->req != NULL) rx->req->done = 1;
  if (rx->ux != NULL) rx->ux->complete = 1;
  rx->req = NULL;
  rx->ux = NULL;
  rx->dst = NULL;
  rx->hdr_got = 0;
}

/* The payload announced by peer's current header has no receive: buffer it as unexpected. */
static hvds_result_t stash_unexpected(tcp_t* t, int peer) {
  tcp_peer_t* pe = &t->peers[peer];
  tcp_rx_t* rx = &pe->rx;
  uint64_t tag = rx->hdr[0];
  size_t len = rx->len;
  if (t->ux_bytes + len > TCP_UNEXPECTED_MAX) {
    return hvds__tcp_fail(t, HVDS_SYSTEM_ERROR, peer,
                          "rank %d sent %zu bytes with tag %llu before any receive for it, and "
                          "%zu bytes of such messages are already buffered (limit %zu)", peer,
                          len, (unsigned long long)tag, t->ux_bytes, TCP_UNEXPECTED_MAX);
  }
  hvds_ux_t* ux = hvds__ux_push(&pe->unexpected, tag, len);
  if (ux == NULL) {
    return hvds__tcp_fail(t, HVDS_SYSTEM_ERROR, peer,
                          "out of memory for a %zu-byte unexpected message from rank %d", len,
                          peer);
  }
  t->ux_bytes += len;
  rx->ux = ux;
  rx->dst = ux->data;
  return HVDS_SUCCESS;
}

/* A whole header arrived from peer: sets up where its payload goes. */
static hvds_result_t on_header(tcp_t* t, int peer) {
  tcp_peer_t* pe = &t->peers[peer];
  tcp_rx_t* rx = &pe->rx;
  uint64_t tag = rx->hdr[0], kind = rx->hdr[1] >> TCP_LEN_BITS;
  size_t len = (size_t)(rx->hdr[1] & TCP_LEN_MASK);
  if (kind == TCP_KIND_BELL) {
    if (tag > pe->bell_epoch) pe->bell_epoch = tag;
    if (tag > t->bell_max) t->bell_max = tag;
    rx->hdr_got = 0;
    return HVDS_SUCCESS;
  }
  if (kind != TCP_KIND_DATA) {
    return hvds__tcp_fail(t, HVDS_REMOTE_ERROR, peer,
                          "rank %d (%s): protocol error: message kind %llu", peer, pe->addr,
                          (unsigned long long)kind);
  }
  rx->len = len;
  rx->got = 0;
  rx->header_only = len >= TCP_PARK_MIN_BYTES;
  tcp_req_t* r = hvds__req_take_tag(&pe->posted, tag);
  if (r != NULL) {
    if (r->bytes != len) {
      return hvds__tcp_fail(t, HVDS_PRECONDITION_ERROR, peer,
                            "rank %d sent %zu bytes with tag %llu but the receive posted for it "
                            "expects %zu bytes", peer, len, (unsigned long long)tag, r->bytes);
    }
    rx->req = r;
    rx->dst = r->buf;
  } else if (len >= TCP_PARK_MIN_BYTES && pe->posted.head == NULL) {
    /* Parked only while no other receive from this peer waits: one that does may need the
     * messages behind this one. */
    rx->parked = 1;
    return HVDS_SUCCESS;
  } else {
    HVDS_CHECK(stash_unexpected(t, peer));
  }
  if (len == 0) payload_done(rx);
  return HVDS_SUCCESS;
}

/* Consumes the staged bytes: headers, bells, payload pieces. */
static hvds_result_t consume_stage(tcp_t* t, int peer) {
  tcp_rx_t* rx = &t->peers[peer].rx;
  while (rx->beg < rx->end && !rx->parked) {
    size_t avail = rx->end - rx->beg;
    if (rx->hdr_got < TCP_HDR_BYTES) {
      size_t n = TCP_HDR_BYTES - rx->hdr_got;
      if (n > avail) n = avail;
      memcpy((char*)rx->hdr + rx->hdr_got, rx->stage + rx->beg, n);
      rx->hdr_got += n;
      rx->beg += n;
      if (rx->hdr_got == TCP_HDR_BYTES) HVDS_CHECK(on_header(t, peer));
    } else {
      size_t n = rx->len - rx->got;
      if (n > avail) n = avail;
      memcpy(rx->dst + rx->got, rx->stage + rx->beg, n);
      rx->got += n;
      rx->beg += n;
      if (rx->got == rx->len) payload_done(rx);
    }
  }
  if (rx->beg == rx->end) rx->beg = rx->end = 0; /* parked: the rest stays staged */
  return HVDS_SUCCESS;
}

/* Reads everything peer's socket holds. */
static hvds_result_t peer_read(tcp_t* t, int peer) {
  tcp_peer_t* pe = &t->peers[peer];
  tcp_rx_t* rx = &pe->rx;
  for (;;) {
    HVDS_CHECK(consume_stage(t, peer));
    if (rx->parked) return HVDS_SUCCESS;
    struct iovec iov[2];
    int n_iov = 0;
    size_t want_payload = 0;
    if (rx->hdr_got == TCP_HDR_BYTES && rx->got < rx->len) {
      want_payload = rx->len - rx->got;
      iov[n_iov].iov_base = rx->dst + rx->got;
      iov[n_iov++].iov_len = want_payload;
    }
    /* Small messages come in batches, so read ahead; after a large one read just the next
     * header, so that its payload is read straight into place. */
    size_t stage_len = !rx->header_only ? TCP_STAGE_BYTES
                       : want_payload > 0 ? TCP_HDR_BYTES
                                          : TCP_HDR_BYTES - rx->hdr_got;
    iov[n_iov].iov_base = rx->stage;
    iov[n_iov++].iov_len = stage_len;
    ssize_t n = readv(pe->fd, iov, n_iov);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return HVDS_SUCCESS;
      hvds__tcp_peer_died(t, peer, errno);
      return HVDS_SUCCESS;
    }
    if (n == 0) {
      hvds__tcp_peer_died(t, peer, 0);
      return HVDS_SUCCESS;
    }
    size_t got = (size_t)n, to_payload = got < want_payload ? got : want_payload;
    rx->got += to_payload;
    if (want_payload > 0 && rx->got == rx->len) payload_done(rx);
    rx->end = got - to_payload;
    // A short read drained the socket: poll again rather than spend a call on EAGAIN.
    if (got < want_payload + stage_len) return consume_stage(t, peer);
  }
}

hvds_result_t hvds__tcp_flush(tcp_t* t, int peer) {
  tcp_peer_t* pe = &t->peers[peer];
  while (pe->sendq.head != NULL && !pe->dead) {
    struct iovec iov[MAX_IOV];
    int n_iov = 0;
    size_t total = 0;
    for (tcp_req_t* r = pe->sendq.head; r != NULL && n_iov + 2 <= MAX_IOV; r = r->next) {
      if (r->sent < TCP_HDR_BYTES) {
        iov[n_iov].iov_base = (char*)r->hdr + r->sent;
        iov[n_iov++].iov_len = TCP_HDR_BYTES - r->sent;
        total += TCP_HDR_BYTES - r->sent;
      }
      size_t off = r->sent > TCP_HDR_BYTES ? r->sent - TCP_HDR_BYTES : 0;
      if (r->bytes > off) {
        iov[n_iov].iov_base = r->buf + off;
        iov[n_iov++].iov_len = r->bytes - off;
        total += r->bytes - off;
      }
    }
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = iov;
    msg.msg_iovlen = (size_t)n_iov;
    ssize_t n = sendmsg(pe->fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return HVDS_SUCCESS;
      hvds__tcp_peer_died(t, peer, errno);
      return HVDS_SUCCESS;
    }
    // Retire the sends the write covered; the first one not covered keeps its offset.
    size_t left = (size_t)n;
    while (left > 0) {
      tcp_req_t* r = pe->sendq.head;
      size_t need = TCP_HDR_BYTES + r->bytes - r->sent;
      if (left < need) {
        r->sent += left;
        break;
      }
      left -= need;
      r->sent += need;
      r->done = 1;
      hvds__req_pop(&pe->sendq);
    }
    // Zero-byte sends are header only, so n > 0 always retires or advances something.
    if ((size_t)n < total) return HVDS_SUCCESS; /* the socket is full */
  }
  return HVDS_SUCCESS;
}

int hvds__tcp_match_unexpected(tcp_t* t, tcp_req_t* r, hvds_result_t* rc) {
  tcp_peer_t* pe = &t->peers[r->peer];
  hvds_ux_t* ux = hvds__ux_find(&pe->unexpected, r->tag);
  if (ux == NULL) return 0;
  if (ux->len != r->bytes) {
    *rc = hvds__tcp_fail(t, HVDS_PRECONDITION_ERROR, r->peer,
                         "rank %d sent %zu bytes with tag %llu but the receive posted for it "
                         "expects %zu bytes", r->peer, ux->len, (unsigned long long)r->tag,
                         r->bytes);
    return 1;
  }
  t->ux_bytes -= ux->len;
  if (ux->complete) {
    if (ux->len > 0) memcpy(r->buf, ux->data, ux->len);
    r->done = 1;
  } else {
    // Still arriving: keep what came so far and let the rest land in the caller's buffer.
    tcp_rx_t* rx = &pe->rx;
    if (rx->got > 0) memcpy(r->buf, ux->data, rx->got);
    HVDS_DEBUG("tcp p2p: takeover of a partly received %zu-byte message at %zu", ux->len, rx->got);
    rx->ux = NULL;
    rx->req = r;
    rx->dst = r->buf;
  }
  hvds__ux_drop(&pe->unexpected, ux);
  return 1;
}

static hvds_result_t unpark(tcp_t* t, int peer) {
  t->peers[peer].rx.parked = 0;
  HVDS_CHECK(stash_unexpected(t, peer));
  return consume_stage(t, peer);
}

int hvds__tcp_take_parked(tcp_t* t, tcp_req_t* r, hvds_result_t* rc) {
  tcp_peer_t* pe = &t->peers[r->peer];
  tcp_rx_t* rx = &pe->rx;
  *rc = HVDS_SUCCESS;
  if (!rx->parked) return 0;
  if (rx->hdr[0] != r->tag) {
    *rc = unpark(t, r->peer);
    return 0;
  }
  if (r->bytes != rx->len) {
    *rc = hvds__tcp_fail(t, HVDS_PRECONDITION_ERROR, r->peer,
                         "rank %d sent %zu bytes with tag %llu but the receive posted for it "
                         "expects %zu bytes", r->peer, rx->len, (unsigned long long)r->tag,
                         r->bytes);
    return 1;
  }
  rx->parked = 0;
  rx->req = r;
  rx->dst = r->buf;
  *rc = consume_stage(t, r->peer); /* the payload's first bytes may be staged already */
  return 1;
}

hvds_result_t hvds__tcp_unpark_all(tcp_t* t) {
  for (int i = 0; i < t->p->size; i++)
    if (t->peers[i].rx.parked) HVDS_CHECK(unpark(t, i));
  return HVDS_SUCCESS;
}

/* Fills t->pfds for one poll; returns how many entries. */
static int build_pollset(tcp_t* t) {
  int n = 0;
  for (int i = 0; i < t->p->size; i++) {
    tcp_peer_t* pe = &t->peers[i];
    if (pe->fd < 0 || pe->dead) continue;
    t->pfds[n].fd = pe->fd;
    t->pfds[n].events =
        (short)((pe->rx.parked ? 0 : POLLIN) | (pe->sendq.head != NULL ? POLLOUT : 0));
    t->pfds[n].revents = 0;
    t->pfd_peer[n++] = i;
  }
  t->pfds[n].fd = t->event_fd;
  t->pfds[n].events = POLLIN;
  t->pfds[n].revents = 0;
  t->pfd_peer[n++] = -1;
  return n;
}

hvds_result_t hvds__tcp_progress(tcp_t* t, int timeout_ms) {
  int n = build_pollset(t);
  int ready = poll(t->pfds, (nfds_t)n, timeout_ms);
  if (ready < 0) {
    if (errno == EINTR) return HVDS_SUCCESS;
    return hvds__tcp_fail(t, HVDS_SYSTEM_ERROR, -1, "poll: %s", strerror(errno));
  }
  for (int i = 0; i < n && ready > 0; i++) {
    short ev = t->pfds[i].revents;
    if (ev == 0) continue;
    ready--;
    int peer = t->pfd_peer[i];
    if (peer < 0) {
      uint64_t count;
      if (read(t->event_fd, &count, sizeof count) < 0 && errno != EAGAIN) {
        HVDS_DEBUG("tcp p2p eventfd read: %s", strerror(errno));
      }
      continue;
    }
    /* A hang-up while parked: read on, so the end of the connection is seen. */
    if ((ev & (POLLHUP | POLLERR)) && t->peers[peer].rx.parked) HVDS_CHECK(unpark(t, peer));
    if (ev & (POLLIN | POLLHUP | POLLERR)) HVDS_CHECK(peer_read(t, peer));
    if ((ev & (POLLOUT | POLLERR)) && !t->peers[peer].dead) HVDS_CHECK(hvds__tcp_flush(t, peer));
  }
  return HVDS_SUCCESS;
}
