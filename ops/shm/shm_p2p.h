/* The point-to-point interface (ops/p2p.h) over shared memory, for ranks on one host: one
 * segment per communicator, a single-producer single-consumer ring per ordered pair of ranks,
 * progressed in the caller's thread (no thread of our own), futex wake-ups after a short poll.
 * See shm_internal.h for the layout and docs/hierarchy.md for measurements. */
#ifndef HVDS_SHM_P2P_H_
#define HVDS_SHM_P2P_H_

#include <stddef.h>

#include "collectives.h"
#include "p2p.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Tunables of one communicator. Initialise with HVDS_SHM_OPTIONS_INIT. */
typedef struct {
  size_t size;       /* sizeof(hvds_shm_options_t) */
  uint32_t version;  /* 1 */
  size_t ring_bytes; /* data bytes of each ring (rank 0's value wins); 0 = hvds__shm_ring_default */
  int poll_us;       /* a wait polls this long before it sleeps; < 0 = hvds__shm_poll_default */
  size_t coll_bytes; /* each rank's slot for hvds__shm_allreduce (rank 0's value wins); 0 =
                        hvds__shm_coll_default */
} hvds_shm_options_t;

#define HVDS_SHM_OPTIONS_INIT \
  { sizeof(hvds_shm_options_t), 1, 0, -1, 0 }

/* Connects size ranks of one host. Rank 0 creates the segment (named with 64 random bits,
 * sized and reserved at once, so that a full /dev/shm fails here and not later with SIGBUS) and
 * publishes its name under "<prefix>/shm" through kv; the others attach to it. Each rank holds
 * a lock on its own byte of the segment while attached, so that its peers learn of its death
 * even when it is a zombie. Blocks until every rank attached; the last one unlinks the name, so
 * nothing is left in /dev/shm (a failed create's name is unlinked by rank 0). timeout_ms (<= 0:
 * none) bounds the rendezvous and is the default timeout of every later wait. iface and hostname
 * are ignored (the signature is the TCP transport's, so that tests can spawn either). On success
 * *out is a communicator whose destroy frees it; on failure *out is NULL, nothing is leaked and
 * err says why. A rank that cannot create or attach publishes why, so the others fail at once.
 *
 * Threading: one thread at a time calls isend/irecv/wait/bell_wait/bell_ring; abort and
 * bell_interrupt may be called from any thread. */
hvds_result_t hvds__shm_p2p_create(const hvds_kv_t* kv, const char* prefix, int rank, int size,
                                   const char* iface, const char* hostname, int timeout_ms,
                                   hvds_p2p_t** out /* OUT */, char* err, size_t errlen);
/* The same with explicit options (NULL = defaults). */
hvds_result_t hvds__shm_p2p_create_opts(const hvds_kv_t* kv, const char* prefix, int rank, int size,
                                        int timeout_ms, const hvds_shm_options_t* o,
                                        hvds_p2p_t** out /* OUT */, char* err, size_t errlen);

/* Ring size for size ranks when none is given: 1 MiB, less when many ranks share a host (about
 * 256 MiB for all rings together, at least 64 KiB each). */
size_t hvds__shm_ring_default(int size);
/* Collective slot per rank when none is given: 32 MiB shared by the ranks, 1 to 8 MiB each. */
size_t hvds__shm_coll_default(int size);
/* Poll time when none is given: 50 us while every rank has a core of its own, else 0: on a host
 * with fewer cores than ranks a rank that polls (even yielding) holds a core its peers need, and
 * measured end to end that costs more than a futex wake-up (docs/hierarchy.md). Only waits for
 * messages up to 256 KiB poll; the others sleep at once. */
int hvds__shm_poll_default(int size);
/* Poll time of an executing segment allreduce when none is given: 50 us while every rank has a
 * core, else 100 us yielding the processor between looks. Its peers were told to run it at the
 * same moment (a negotiation agreed on it), so they arrive within microseconds unless the
 * scheduler holds them, and sleeping for each of its synchronisations costs two context
 * switches (np 4 on 2 cores, 64 KiB: about 75 us per allreduce sleeping, 50 polling). The
 * negotiation itself (hvds__shm_agree) keeps hvds__shm_poll_default: peers may still be
 * computing, and a rank polling for them takes the processor they compute on. */
int hvds__shm_coll_poll_default(int size);

/* 1 when p is a shared-memory communicator. */
int hvds__shm_p2p_is(const hvds_p2p_t* p);

/* In-place allreduce of count elements of buf among the ranks of p, a shared-memory
 * communicator (not a view), straight through the segment: in rounds of half a slot per rank,
 * every rank copies its input in, reduces its own 1/P of the round from every rank's slot, and
 * copies every part of the result out (shm_coll.c). Every rank of p calls it with the same
 * count, dtype and op, in the same order as its other collectives. Blocks; on failure p->error
 * says why and the communicator is failed. */
hvds_result_t hvds__shm_allreduce(hvds_p2p_t* p, void* buf, size_t count, hvds_dtype_t dtype,
                                  hvds_reduce_op_t op);
/* hvds__shm_allreduce for a negotiation, whose peers may come late: its waits poll as the
 * transport's own (hvds__shm_poll_default), not as an executing collective's. */
hvds_result_t hvds__shm_agree(hvds_p2p_t* p, void* buf, size_t count, hvds_dtype_t dtype,
                              hvds_reduce_op_t op);

/* As hvds__shm_allreduce, over the concatenation of npieces tensors, copied straight from their
 * inputs into the segment and from the segment to their outputs (no fusion buffer). Every rank
 * passes the same total bytes. */
hvds_result_t hvds__shm_allreduce_pieces(hvds_p2p_t* p, const hvds_coll_piece_t* pieces,
                                         int npieces, hvds_dtype_t dtype, hvds_reduce_op_t op);

/* Test only: every later allreduce of this rank writes its slot with kind (0 through the
 * caches, 1 streamed to memory: shm_store_kind.h), or chooses again with -1. */
void hvds__shm_force_store_kind_for_test(hvds_p2p_t* p, int kind);

/* Test only: makes this rank vanish as a crashed process would (drops its liveness lock without
 * marking itself closed, unmaps), then frees p. Its peers' waits must fail naming it. */
void hvds__shm_p2p_crash_for_test(hvds_p2p_t* p);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_SHM_P2P_H_ */
