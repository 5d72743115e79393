/* State shared by the files of the TCP transport: tcp_p2p.c (the ops table, requests, failure,
 * doorbell), tcp_progress.c (the engine that moves bytes) and tcp_connect.c (the mesh).
 *
 * Wire format, per connection and direction: a stream of messages, each a 16-byte header
 * {uint64 tag, uint64 kind << 56 | len} in host byte order (every rank runs on the same
 * architecture) followed by len payload bytes. Kind TCP_KIND_DATA carries a user message;
 * kind TCP_KIND_BELL carries no payload and a doorbell epoch in the tag field, so the doorbell
 * never collides with any user tag.
 */
#ifndef HVDS_TCP_INTERNAL_H_
#define HVDS_TCP_INTERNAL_H_

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "atomics.h"
#include "p2p_queue.h"
#include "tcp_p2p.h"

#ifdef __cplusplus
extern "C" {
#endif

struct pollfd;

#define TCP_KIND_DATA 0u
#define TCP_KIND_BELL 1u
#define TCP_LEN_BITS 56
#define TCP_LEN_MASK ((UINT64_C(1) << TCP_LEN_BITS) - 1)
#define TCP_HDR_BYTES 16
#define TCP_STAGE_BYTES (64 * 1024)            /* per-peer read staging buffer */
#define TCP_UNEXPECTED_MAX ((size_t)1 << 30)   /* buffered unexpected payload, all peers */
#define TCP_PARK_MIN_BYTES (64 * 1024)          /* unexpected payloads this large wait unread */
#define TCP_ADDR_LEN 64

typedef hvds_p2p_req_t tcp_req_t;

/* Where the bytes arriving from a peer go. */
typedef struct {
  uint64_t hdr[2];
  size_t hdr_got;  /* header bytes read; TCP_HDR_BYTES while a payload is being read */
  char* dst;       /* payload destination: rx.req->buf or rx.ux->data */
  size_t len, got; /* payload length and bytes of it received */
  tcp_req_t* req;  /* the matched receive, or NULL */
  hvds_ux_t* ux;   /* the unexpected message being filled, or NULL */
  char* stage;     /* TCP_STAGE_BYTES read ahead; [beg, end) not yet consumed */
  size_t beg, end;
  /* A large payload arrived before its receive: it stays in the kernel (and the stage) until
   * a receive with its tag is posted, which then takes it without an extra copy. */
  int parked;
  /* The last payload was large: read the next header alone, so that a large payload behind it
   * goes straight to its buffer instead of through the stage. */
  int header_only;
} tcp_rx_t;

typedef struct {
  int fd;                     /* -1 for this rank itself */
  char addr[TCP_ADDR_LEN];    /* "ip:port" the peer listened on, for messages */
  int dead;                   /* the connection failed; dead_msg says how */
  char dead_msg[256];
  hvds_req_fifo_t sendq;     /* sends not yet fully written, in order */
  hvds_req_fifo_t posted;    /* receives posted and not yet matched, in order */
  hvds_ux_list_t unexpected; /* messages that came before their receive, in arrival order */
  tcp_rx_t rx;
  uint64_t bell_epoch;        /* highest doorbell epoch this peer rang */
} tcp_peer_t;

typedef struct {
  hvds_p2p_t* p;
  tcp_peer_t* peers;       /* size entries */
  int event_fd;            /* wakes a poll from abort / bell_interrupt */
  struct pollfd* pfds;     /* size + 1 entries: the live peers' sockets, then the eventfd */
  int* pfd_peer;           /* pfds[i] belongs to peer pfd_peer[i] */
  size_t ux_bytes;         /* payload bytes held in unexpected messages */
  uint64_t bell_max;       /* highest epoch any peer rang */
  int poll_us;             /* a wait polls without sleeping this long before it blocks */
  hvds_req_pool_t idle;    /* request objects for reuse */

  pthread_mutex_t mu;      /* guards the failure record below and p->error / p->failed_peer */
  HVDS_ATOMIC(int) failed;       /* set once (after the record is written), never cleared */
  hvds_result_t fail_rc;
  HVDS_ATOMIC(int) interrupt;    /* bell_interrupt came and no bell_wait has consumed it yet */
} tcp_t;

/* tcp_fail.c */
/* Wakes a thread of this rank that waits in poll() (the event descriptor). Any thread. */
void hvds__tcp_wake(tcp_t* t);
/* Marks the communicator failed with the first cause, closes every connection so peers fail at
 * once, and wakes a waiter. Returns the first failure's status. Any thread. */
hvds_result_t hvds__tcp_fail(tcp_t* t, hvds_result_t rc, int peer, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* tcp_progress.c (the one thread running this communicator's collectives at a time) */
/* One round of the engine: polls every connection (and the eventfd) for up to timeout_ms (< 0:
 * no limit), then reads and writes whatever is ready. Returns a failure only when the whole
 * communicator failed; a single peer's broken connection marks that peer dead. */
hvds_result_t hvds__tcp_progress(tcp_t* t, int timeout_ms);
/* Writes as much of peer's send queue as the socket takes, completing sends. */
hvds_result_t hvds__tcp_flush(tcp_t* t, int peer);
/* Marks peer's connection broken with the system error err (0: end of file). */
void hvds__tcp_peer_died(tcp_t* t, int peer, int err);
/* Matches a new receive against peer's unexpected messages: on a match copies (or takes over the
 * partly read message) and returns 1, else 0. Sets *rc on a size mismatch. */
int hvds__tcp_match_unexpected(tcp_t* t, tcp_req_t* r, hvds_result_t* rc);

/* A receive r was posted for its peer: if that peer's parked message has r's tag, r takes it
 * (returns 1); otherwise the parked message becomes an ordinary unexpected one so that later
 * messages can be read (returns 0). Sets *rc on failure. */
int hvds__tcp_take_parked(tcp_t* t, tcp_req_t* r, hvds_result_t* rc);
/* Turns every parked message into an unexpected one (before waiting for anything else). */
hvds_result_t hvds__tcp_unpark_all(tcp_t* t);

/* tcp_connect.c */
/* Builds the mesh: fills every peer's fd (non-blocking, tuned) and addr. On failure closes what
 * it opened, writes err, and returns the failure. */
hvds_result_t hvds__tcp_connect_mesh(tcp_t* t, const hvds_kv_t* kv, const char* prefix,
                                     const char* iface, const char* hostname, int timeout_ms,
                                     char* err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_TCP_INTERNAL_H_ */
