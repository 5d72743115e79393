/* The point-to-point interface every collective algorithm is written against.
 *
 * An algorithm sees only ranks 0..size-1 and non-blocking send/recv of byte ranges with a tag.
 * Messages between one pair of ranks with the same tag are matched in the order they were
 * posted. Implementations: Gloo's TCP pairs (ops/gloo/), the in-process transport used by the
 * tests (test/), and sub-communicator views over either (p2p_sub.c) for process sets and the
 * local and cross groups.
 */
#ifndef HVDS_P2P_H_
#define HVDS_P2P_H_

#include <stddef.h>
#include <stdint.h>

#include "hvdsparse.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hvds_p2p hvds_p2p_t;
typedef struct hvds_p2p_req hvds_p2p_req_t; /* opaque, owned by the implementation */

typedef struct hvds_p2p_ops {
  uint32_t version; /* 1 */
  const char* name;
  /* Starts sending bytes from buf to peer. Never blocks. buf must stay valid and unchanged
   * until wait() returns for *req. bytes may be 0. */
  hvds_result_t (*isend)(hvds_p2p_t* p, int peer, const void* buf, size_t bytes, uint64_t tag,
                         hvds_p2p_req_t** req /* OUT */);
  /* Starts receiving exactly bytes from peer into buf. Never blocks. */
  hvds_result_t (*irecv)(hvds_p2p_t* p, int peer, void* buf, size_t bytes, uint64_t tag,
                         hvds_p2p_req_t** req /* OUT */);
  /* Blocks until req completes, fails, or timeout_ms passes (< 0: the communicator's timeout).
   * Frees req in every case. On failure p->error names the peer and the cause; a failed or
   * timed-out communicator stays failed. */
  hvds_result_t (*wait)(hvds_p2p_t* p, hvds_p2p_req_t* req, int timeout_ms);
  /* Closes every connection so that peers blocked on this rank fail at once. May be called
   * from any thread. Pending and later operations fail. */
  void (*abort)(hvds_p2p_t* p);
  /* Frees the communicator, p itself included; pending requests must have been waited for. */
  void (*destroy)(hvds_p2p_t* p);
  /* Optional (NULL when not supported): a doorbell that lets idle ranks sleep without a
   * heartbeat. bell_wait blocks until a peer rang with an epoch >= epoch (older rings are
   * stale and ignored), or bell_interrupt is called from any thread (HVDS_IN_PROGRESS), or the
   * communicator fails. bell_ring rings every peer with epoch; it blocks only until the rings
   * are delivered. */
  hvds_result_t (*bell_wait)(hvds_p2p_t* p, uint64_t epoch);
  hvds_result_t (*bell_ring)(hvds_p2p_t* p, uint64_t epoch);
  void (*bell_interrupt)(hvds_p2p_t* p);
} hvds_p2p_ops_t;

struct hvds_p2p {
  int rank;                  /* this rank, 0..size-1 */
  int size;                  /* number of ranks */
  int timeout_ms;            /* default wait timeout */
  const hvds_p2p_ops_t* ops; /* implementation */
  void* impl;                /* implementation state */
  int failed_peer;           /* rank (in this communicator) of the peer that failed, or -1 */
  char error[512];           /* message of the last failure */
};

/* Where a rank publishes its address and reads its peers': a key-value store given as callbacks,
 * so that no transport depends on a store implementation. get() waits up to timeout_ms and
 * returns a malloc'd value the transport frees. */
typedef struct {
  void* ctx;
  hvds_result_t (*set)(void* ctx, const char* key, const void* val, size_t len);
  hvds_result_t (*get)(void* ctx, const char* key, int timeout_ms, void** val, size_t* len);
} hvds_kv_t;

/* Thin wrappers: the one place for argument checks and tracing. */
hvds_result_t hvds__p2p_isend(hvds_p2p_t* p, int peer, const void* buf, size_t bytes,
                              uint64_t tag, hvds_p2p_req_t** req);
hvds_result_t hvds__p2p_irecv(hvds_p2p_t* p, int peer, void* buf, size_t bytes, uint64_t tag,
                              hvds_p2p_req_t** req);
hvds_result_t hvds__p2p_wait(hvds_p2p_t* p, hvds_p2p_req_t* req);
/* Blocking forms. sendrecv posts both first, so neighbours exchanging at once never deadlock. */
hvds_result_t hvds__p2p_send(hvds_p2p_t* p, int peer, const void* buf, size_t bytes, uint64_t tag);
hvds_result_t hvds__p2p_recv(hvds_p2p_t* p, int peer, void* buf, size_t bytes, uint64_t tag);
hvds_result_t hvds__p2p_sendrecv(hvds_p2p_t* p, int to, const void* sbuf, size_t sbytes, int from,
                                 void* rbuf, size_t rbytes, uint64_t tag);
/* Waits for every non-NULL reqs[i] and sets it to NULL, going on after a failure so that
 * nothing is left pending. Returns the first failure; p->error keeps that failure's message. */
hvds_result_t hvds__p2p_wait_all(hvds_p2p_t* p, hvds_p2p_req_t** reqs, int n);

/* Ends an operation that stopped with rc: waits for every non-NULL reqs[i] as above. Returns rc
 * when it is a failure (p->error keeps rc's message), else the first failure of the waits. */
hvds_result_t hvds__p2p_finish(hvds_p2p_t* p, hvds_result_t rc, hvds_p2p_req_t** reqs, int n);

/* How hvds__p2p_sendrecv_seg() cuts and combines a transfer. */
typedef struct {
  size_t seg_bytes;     /* segment size (a multiple of the element size); 0 = one segment */
  void* scratch;        /* 2 * seg_bytes (rbytes when seg_bytes is 0); NULL = no reduction */
  hvds_dtype_t dtype;   /* with scratch: rbuf = rbuf op received, element-wise */
  hvds_reduce_op_t op;
} hvds_p2p_seg_t;

/* The pipelined step every algorithm is built from: sends sbytes of sbuf to `to` while receiving
 * rbytes from `from`, both cut into segments of seg->seg_bytes. Segment j+1 of both directions is
 * posted before segment j is reduced, so transfer overlaps reduction. Without scratch the
 * segments land in rbuf directly. to < 0 or sbytes == 0 sends nothing; from < 0 or rbytes == 0
 * receives nothing (both sides know the sizes, so no empty messages travel). sbuf and rbuf may
 * be the same memory: segment j is only reduced after its send completed. Blocks. */
hvds_result_t hvds__p2p_sendrecv_seg(hvds_p2p_t* p, int to, const void* sbuf, size_t sbytes,
                                     int from, void* rbuf, size_t rbytes, uint64_t tag,
                                     const hvds_p2p_seg_t* seg);
void hvds__p2p_abort(hvds_p2p_t* p);
void hvds__p2p_destroy(hvds_p2p_t* p); /* accepts NULL; ops->destroy frees p */

/* A view of parent restricted to ranks[0..n-1] (parent ranks, each distinct). The view's rank
 * i is parent rank ranks[i]. Tags are kept apart from the parent's and other views' by
 * space_id (1..65535), which the view puts in the high 16 bits of every tag: tags used on the
 * parent and on any view must stay below 2^48 (a larger tag on a view fails with
 * HVDS_INVALID_ARGUMENT), so views do not nest. The view does not own parent; its abort aborts
 * the parent (a failure is fatal to the job), its destroy frees only the view. *out is NULL if
 * this rank is not in ranks. */
hvds_result_t hvds__p2p_sub_create(hvds_p2p_t* parent, const int* ranks, int n, uint16_t space_id,
                                   hvds_p2p_t** out /* OUT */);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_P2P_H_ */
