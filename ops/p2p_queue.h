/* Requests and their queues for the byte-stream transports (ops/tcp/, ops/shm/): one request
 * layout, a free list of idle requests, FIFOs of sends and posted receives, and the list of
 * messages that arrived before their receive. Matching is by tag within one peer, oldest first,
 * which gives p2p.h's ordering rule. Not thread-safe: each communicator keeps its own. */
#ifndef HVDS_P2P_QUEUE_H_
#define HVDS_P2P_QUEUE_H_

#include <stddef.h>
#include <stdint.h>

#include "p2p.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One posted send or receive (the opaque hvds_p2p_req_t of p2p.h). */
struct hvds_p2p_req {
  struct hvds_p2p_req* next; /* in a peer's send queue, posted list, or the free list */
  int peer;
  int is_send;
  int done; /* every byte handed to the transport (send) or received (recv) */
  uint64_t tag;
  char* buf; /* the caller's buffer */
  size_t bytes;
  size_t sent;     /* send: bytes written so far (tcp: header and payload; shm: payload) */
  uint64_t hdr[2]; /* send: the header as it goes out */
  int hdr_written; /* send: the header is out (shm) */
};

/* Requests in order: a peer's sends not yet written, or its receives not yet matched. */
typedef struct {
  hvds_p2p_req_t* head;
  hvds_p2p_req_t* tail;
} hvds_req_fifo_t;

/* Idle requests kept for reuse, at most HVDS_REQ_POOL_MAX. */
typedef struct {
  hvds_p2p_req_t* free;
  int n;
} hvds_req_pool_t;

#define HVDS_REQ_POOL_MAX 64

/* A zeroed request from the pool (or malloc); NULL when out of memory. */
hvds_p2p_req_t* hvds__req_take(hvds_req_pool_t* pool);
void hvds__req_release(hvds_req_pool_t* pool, hvds_p2p_req_t* r);
void hvds__req_pool_clear(hvds_req_pool_t* pool);

void hvds__req_append(hvds_req_fifo_t* q, hvds_p2p_req_t* r);
/* Unlinks the head (a send that was written whole). */
void hvds__req_pop(hvds_req_fifo_t* q);
/* Unlinks r wherever it stands; 1 when q held it. */
int hvds__req_unlink(hvds_req_fifo_t* q, hvds_p2p_req_t* r);
/* The oldest request with tag, unlinked; NULL when none. */
hvds_p2p_req_t* hvds__req_take_tag(hvds_req_fifo_t* q, uint64_t tag);

/* A message that arrived before its receive was posted. */
typedef struct hvds_ux {
  struct hvds_ux* next;
  uint64_t tag;
  size_t len;
  int complete; /* all len bytes are in data; else it is being read into (its peer's rx.ux) */
  char* data;   /* malloc'd, NULL when len is 0 */
} hvds_ux_t;

/* A peer's unexpected messages in arrival order. */
typedef struct {
  hvds_ux_t* head;
  hvds_ux_t* tail;
} hvds_ux_list_t;

/* Appends a new message of len bytes (data allocated, not yet filled); NULL when out of
 * memory, the list unchanged. */
hvds_ux_t* hvds__ux_push(hvds_ux_list_t* l, uint64_t tag, size_t len);
/* The oldest message with tag, left in the list; NULL when none. */
hvds_ux_t* hvds__ux_find(const hvds_ux_list_t* l, uint64_t tag);
/* Unlinks ux (found by hvds__ux_find) and frees it. */
void hvds__ux_drop(hvds_ux_list_t* l, hvds_ux_t* ux);
void hvds__ux_clear(hvds_ux_list_t* l);

#ifdef __cplusplus
}
#endif

#endif /* HVDS_P2P_QUEUE_H_ */
