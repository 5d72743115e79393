/* State shared by the files of the shared-memory transport: shm_seg.c (the segment: layout,
 * create and attach, liveness, wake-ups), shm_p2p.c (the ops table, requests, waits, failure,
 * doorbell) and shm_progress.c (the engine that moves bytes through the rings).
 *
 * The segment (one per communicator, i.e. per host and job):
 *
 *   +--------------------+  shm_hdr_t: magic, geometry, attach count, first failure
 *   | header (4 KiB)     |
 *   +--------------------+  shm_ctrl_t per rank (512 B): pid, state, futex word, sleeping
 *   | ctrl[0..P-1]       |  flag, doorbell epoch, why it failed, collective progress counters
 *   +--------------------+
 *   | coll[0..P-1]       |  coll_bytes per rank: the slots of shm_coll.c's allreduce
 *   +--------------------+  shm_ring_t per ordered pair (src, dst), src != dst, in the order
 *   | ring[s][d] ...     |  src * (P-1) + (dst < src ? dst : dst - 1): head and tail on their
 *   +--------------------+  own cache lines, then ring_bytes of data
 *
 * Each ring is a single-producer single-consumer byte stream. head and tail count bytes since
 * the start (never wrap); the producer alone writes head, the consumer alone writes tail.
 * A message is a 64-byte record header {tag, len} at a 64-byte aligned position followed by
 * len payload bytes (wrapping around the end of the ring when they must); the next record
 * starts at the next 64-byte boundary. A message longer than the ring streams through it in
 * slices: the producer publishes head every SHM_SLICE bytes, so the consumer copies out one
 * slice while the next is copied in.
 */
#ifndef HVDS_SHM_INTERNAL_H_
#define HVDS_SHM_INTERNAL_H_

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "atomics.h"
#include "p2p_queue.h"
#include "shm_p2p.h"
#include "shm_store_kind.h"

/* Bytes of its own part a rank reduces from every slot before it moves on (shm_coll.c's step
 * 2): small enough to stay in the first-level cache from its copy-in to its copy-out. */
#define SHM_REDUCE_BLOCK_BYTES ((size_t)8 << 10)

#ifdef __cplusplus
extern "C" {
#endif

#define SHM_MAGIC UINT64_C(0x6876647373686d31) /* "hvdsshm1" */
#define SHM_HDR_BYTES 4096
#define SHM_CTRL_BYTES 512
#define SHM_RING_HDR_BYTES 128
#define SHM_REC_BYTES 64                       /* record header size and alignment */
#define SHM_SLICE ((size_t)64 << 10)           /* producer publishes head at least this often */
#define SHM_PARK_MIN ((size_t)64 << 10)        /* unexpected payloads this large wait in the ring */
#define SHM_UNEXPECTED_MAX ((size_t)1 << 30)   /* buffered unexpected payload, all peers */
#define SHM_LIVENESS_MS 100                    /* a sleeping wait checks its peer this often */
#define SHM_POLL_MAX_BYTES ((size_t)256 << 10) /* waits for larger messages sleep at once */

/* ctrl.state */
#define SHM_STATE_EMPTY 0  /* not attached yet */
#define SHM_STATE_ALIVE 1  /* attached; holds its liveness lock */
#define SHM_STATE_CLOSED 2 /* destroyed its communicator cleanly */

typedef struct {
  uint64_t magic;           /* SHM_MAGIC, stored last by the creator (release) */
  uint32_t version;         /* 1 */
  int32_t size;             /* ranks */
  uint64_t ring_bytes;      /* data bytes per ring, a multiple of SHM_REC_BYTES */
  uint64_t coll_bytes;      /* bytes of each rank's collective slot, a multiple of 128 */
  uint64_t total_bytes;     /* whole segment */
  HVDS_ATOMIC(int32_t) attached; /* ranks that attached; the last one unlinks the name */
  HVDS_ATOMIC(int32_t) failed;   /* 0, or 1 + the rank whose failure every wait reports */
} shm_hdr_t;

typedef struct {
  HVDS_ATOMIC(int32_t) pid;       /* the attached process */
  HVDS_ATOMIC(int32_t) state;     /* SHM_STATE_* */
  HVDS_ATOMIC(uint32_t) wake_seq; /* futex word: bumped by whoever may have unblocked this rank */
  HVDS_ATOMIC(int32_t) sleeping;  /* this rank is (about to be) in futex_wait on wake_seq: 1 for
                                anything, else what it waits for (shm_coll.c) */
  HVDS_ATOMIC(uint64_t) bell;     /* highest doorbell epoch any peer rang */
  uint64_t pidns;            /* inode of the process's pid namespace (0: unknown) */
  char why[200];             /* why this rank failed, for its peers' messages */
  /* shm_coll.c: the last collective round (+1) whose input this rank copied in, whose part it
   * reduced, and whose result it copied out. Each on its own cache line. */
  HVDS_ALIGNAS(64) HVDS_ATOMIC(uint64_t) arrived;
  HVDS_ALIGNAS(64) HVDS_ATOMIC(uint64_t) reduced;
  HVDS_ALIGNAS(64) HVDS_ATOMIC(uint64_t) done;
} shm_ctrl_t;

typedef struct {
  HVDS_ATOMIC(uint64_t) head; /* producer: bytes published */
  char pad0[64 - sizeof(uint64_t)];
  HVDS_ATOMIC(uint64_t) tail; /* consumer: bytes consumed */
  char pad1[64 - sizeof(uint64_t)];
} shm_ring_t; /* followed by ring_bytes of data */

typedef hvds_p2p_req_t shm_req_t;

/* The message being read from a peer's ring. */
typedef struct {
  int active; /* a header was consumed and its payload is being copied */
  uint64_t tag;
  size_t len, got;
  char* dst;      /* rx.req->buf or rx.ux->data */
  shm_req_t* req; /* the matched receive, or NULL */
  hvds_ux_t* ux;  /* the unexpected message being filled, or NULL */
} shm_rx_t;

typedef struct {
  shm_ring_t* out; /* ring this rank produces into (to the peer) */
  char* out_data;
  uint64_t out_head; /* private copy of out->head */
  shm_ring_t* in;    /* ring this rank consumes (from the peer) */
  char* in_data;
  uint64_t in_tail;                 /* private copy of in->tail */
  hvds_req_fifo_t sendq;            /* sends not yet fully written, in order */
  hvds_req_fifo_t posted;           /* receives posted and not yet matched, in order */
  hvds_ux_list_t unexpected;        /* messages that came before their receive, in order */
  shm_rx_t rx;
} shm_peer_t;

typedef struct {
  hvds_p2p_t* p;
  char name[64]; /* the segment's name; "" once this rank unlinked it */
  int creator;   /* rank 0: created the segment, unlinks it at close if still named */
  int fd;        /* the segment, also the file the liveness locks are taken on */
  char* base;    /* mapping of total_bytes */
  size_t map_bytes;
  shm_hdr_t* hdr;
  shm_ctrl_t* ctrl; /* size entries */
  shm_ctrl_t* me;   /* ctrl[rank] */
  size_t ring_bytes;
  char* coll; /* the collective slots: rank q's at coll + q * coll_bytes */
  size_t coll_bytes;
  uint64_t round;    /* collective rounds run so far (the same on every rank) */
  shm_peer_t* peers; /* size entries; peers[rank] unused */
  size_t ux_bytes;   /* payload bytes held in unexpected messages */
  int poll_us;       /* a wait polls this long before it sleeps */
  int coll_poll_us;  /* the same for the waits of an executing segment collective */
  int wait_poll_us;  /* what the running segment collective's waits poll */
  int yield;         /* polls yield the processor (more ranks than cores) */
  hvds_store_choice_t store;    /* the slot writes' kind per allreduce size */
  hvds_store_kind_t store_kind; /* the running allreduce's */
  /* a streamed allreduce's block being reduced (shm_coll.c), aligned for any element type
   * (16: what calloc guarantees the struct) */
  char block[SHM_REDUCE_BLOCK_BYTES] __attribute__((aligned(16)));
  int crashed;       /* test only: close as a crashed process would */
  hvds_req_pool_t idle; /* request objects for reuse */

  pthread_mutex_t mu; /* guards the failure record and p->error / p->failed_peer */
  HVDS_ATOMIC(int) failed;  /* set once (after the record is written), never cleared */
  hvds_result_t fail_rc;
  HVDS_ATOMIC(int) interrupt; /* bell_interrupt came and no bell_wait consumed it yet */
} shm_t;

/* shm_seg.c */
/* Creates (rank 0) or attaches the segment of this communicator and takes the liveness lock.
 * On failure leaves s partly filled for hvds__shm_seg_close and writes err. */
hvds_result_t hvds__shm_seg_open(shm_t* s, const hvds_kv_t* kv, const char* prefix,
                                 size_t ring_bytes, size_t coll_bytes, int timeout_ms, char* err,
                                 size_t errlen);
/* Marks this rank closed (unless failed), drops the lock, unmaps; tolerates a partial s. */
void hvds__shm_seg_close(shm_t* s);
/* The ring src -> dst and its data. */
shm_ring_t* hvds__shm_ring(const shm_t* s, int src, int dst);
/* 1 when peer attached and its process is gone without closing (its lock is free). */
int hvds__shm_peer_dead(shm_t* s, int peer);
/* Wakes peer if it sleeps (or unconditionally when force). Any thread. */
void hvds__shm_wake(shm_t* s, int peer, int force);
/* Sleeps on this rank's futex word until it moves from seq or ms pass. */
void hvds__shm_sleep(shm_t* s, uint32_t seq, int ms);

/* shm_fail.c */
/* Marks the communicator failed with the first cause (p->failed_peer = culprit, the peer it
 * lost, or -1), publishes it to every peer and wakes them: their waits then fail naming this
 * rank, with this rank's message. Any thread. */
hvds_result_t hvds__shm_fail(shm_t* s, hvds_result_t rc, int culprit, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* shm_p2p.c */
/* A peer published a failure: fails here too, naming it. HVDS_SUCCESS when none did (and this
 * communicator has not failed). */
hvds_result_t hvds__shm_check_remote(shm_t* s);

/* shm_progress.c (the communicator's thread only) */
/* Moves whatever can move on every pair. Returns the number of bytes and completions that
 * moved (0: nothing could), or -1 after failing the communicator (size mismatch, memory). */
long hvds__shm_progress(shm_t* s);
/* Writes as much of peer's send queue as its ring takes (the eager start of a send). */
long hvds__shm_pump_send(shm_t* s, int peer);
/* Matches a new receive against peer's unexpected messages: on a match copies (or takes over
 * the message being filled) and returns 1, else 0. */
int hvds__shm_match_unexpected(shm_t* s, shm_req_t* r);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_SHM_INTERNAL_H_ */
