/* Collective algorithms over the point-to-point interface (p2p.h). One algorithm per file.
 * All counts are elements unless named *_bytes. Every function blocks until done or failed, and
 * on failure leaves the message in p->error. Buffers are the caller's. */
#ifndef HVDS_COLLECTIVES_H_
#define HVDS_COLLECTIVES_H_

#include <stddef.h>
#include <stdint.h>

#include "p2p.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  HVDS_ALGO_AUTO = 0,
  HVDS_ALGO_RING = 1, /* bandwidth-optimal: reduce-scatter + allgather around a ring */
  HVDS_ALGO_RHD = 2,  /* latency-optimal: recursive halving then doubling */
  HVDS_ALGO_COUNT
} hvds_algo_t;

typedef struct {
  uint64_t tag;          /* unique among operations running at once on this communicator */
  hvds_algo_t algorithm; /* HVDS_ALGO_AUTO picks by size */
  size_t chunk_bytes;    /* ring pipeline segment; 0 = default */
  size_t rhd_max_bytes;  /* AUTO: halving-doubling up to this many bytes; 0 = default */
} hvds_coll_opts_t;

/* One tensor of a fused collective that a backend moves straight from its input to its output
 * (no fusion buffer): bytes from in (NULL: zeros, a rank without the tensor), the result to out
 * (NULL: not wanted; may equal in). */
typedef struct {
  const void* in;
  void* out;
  size_t bytes; /* a multiple of the element size */
} hvds_coll_piece_t;

/* Defaults used when an hvds_coll_opts_t field is 0 (or o is NULL). */
#define HVDS_COLL_DEFAULT_CHUNK_BYTES ((size_t)1 << 20)
#define HVDS_COLL_DEFAULT_RHD_MAX_BYTES ((size_t)256 << 10)

/* Helpers shared by the algorithm files (coll_util.c). */
/* The pipeline segment: o->chunk_bytes (default 1 MiB) rounded down to a multiple of esize,
 * at least one element. Identical on every rank for identical options. */
size_t hvds__coll_segment(const hvds_coll_opts_t* o, size_t esize);
/* The ring segment the runtime picks for an allreduce of bytes over P ranks on a link of
 * beta seconds per byte (0: unknown): about four segments per block, so transfer and reduction
 * overlap, within 256 KiB and a cap of what the link moves in 2 ms (256 KiB to 1 MiB). Small
 * segments shorten the pipeline's fill on slow links; on fast or CPU-bound ones each message
 * costs CPU, so they stay large. Measured in docs/benchmarks.md. */
size_t hvds__coll_ring_segment(size_t bytes, int P, double beta);
/* The largest allreduce the runtime runs by halving-doubling when nobody set the switch point,
 * on a link of beta seconds per byte (0: unknown). Where the wire is the limit (4 Gbit/s and
 * below) the ring is faster from 128 KiB at 4, 8 and 16 hosts, whatever the rate (100 Mbit/s to
 * 1 Gbit/s): 64 KiB. Where the CPUs are (faster links, loopback) halving-doubling's fewer steps
 * win up to about 1 MiB: 1 MiB. Measured in docs/benchmarks.md. */
size_t hvds__coll_rhd_max_for_link(double beta);
/* HVDS_SUCCESS when dtype is known and op has a kernel for it; else the error, with p->error
 * set. Used before any message is sent, so every rank fails the same way. */
hvds_result_t hvds__coll_check(hvds_p2p_t* p, hvds_dtype_t dtype, hvds_reduce_op_t op);
/* Sets p->error to "<what>: out of memory" and returns HVDS_SYSTEM_ERROR. */
hvds_result_t hvds__coll_nomem(hvds_p2p_t* p, const char* what);

/* The ring's P-1 steps as one pipelined stream of segments (ring_stream.c): at step k this rank
 * sends block (rank-k-shift) mod P to the right and receives block (rank-k-shift-1) mod P from
 * the left, segment j of step k+1 leaving once segment j of step k has arrived. off[0..P] are
 * the blocks' byte offsets; seg as for hvds__p2p_sendrecv_seg (with scratch: 2 segments, each
 * arriving segment reduced into its block; without: it lands in place). */
hvds_result_t hvds__ring_stream(hvds_p2p_t* p, void* buf, const size_t* off, int shift,
                                uint64_t tag, const hvds_p2p_seg_t* seg);

/* In-place allreduce of count elements of buf. */
hvds_result_t hvds__allreduce(hvds_p2p_t* p, void* buf, size_t count, hvds_dtype_t dtype,
                              hvds_reduce_op_t op, const hvds_coll_opts_t* o);
hvds_result_t hvds__allreduce_ring(hvds_p2p_t* p, void* buf, size_t count, hvds_dtype_t dtype,
                                   hvds_reduce_op_t op, const hvds_coll_opts_t* o);
hvds_result_t hvds__allreduce_rhd(hvds_p2p_t* p, void* buf, size_t count, hvds_dtype_t dtype,
                                  hvds_reduce_op_t op, const hvds_coll_opts_t* o);
/* In-place Adasum allreduce (allreduce_adasum.c) of ntensors tensors laid out one after another
 * in buf, counts[i] elements each, each combined on its own; float16, bfloat16, float32 and
 * float64 (else HVDS_INVALID_ARGUMENT with p->error set, before any message). */
hvds_result_t hvds__allreduce_adasum(hvds_p2p_t* p, void* buf, const size_t* counts, int ntensors,
                                     hvds_dtype_t dtype, uint64_t tag);
/* Name of the algorithm hvds__allreduce would run ("ring", "rhd"), for the timeline. */
const char* hvds__allreduce_choice(const hvds_p2p_t* p, size_t bytes, const hvds_coll_opts_t* o);

/* The registry of dense allreduce algorithms (allreduce.c): id, name and entry point, so the
 * knob, the selector and the tests pick by id or by name. */
typedef struct {
  hvds_algo_t id;
  const char* name;
  hvds_result_t (*run)(hvds_p2p_t* p, void* buf, size_t count, hvds_dtype_t dtype,
                       hvds_reduce_op_t op, const hvds_coll_opts_t* o);
} hvds_allreduce_algo_info_t;
/* NULL for HVDS_ALGO_AUTO or an unknown id. */
const hvds_allreduce_algo_info_t* hvds__allreduce_algo_info(hvds_algo_t a);
/* HVDS_ALGO_AUTO for NULL or "auto"; HVDS_ALGO_COUNT for an unknown name. */
hvds_algo_t hvds__allreduce_algo_from_name(const char* name);

/* In-place reduce-scatter: buf holds size blocks, block r has counts[r] elements and starts
 * after blocks 0..r-1. On return this rank's block holds the reduction; other blocks are
 * scratch. */
hvds_result_t hvds__reducescatter(hvds_p2p_t* p, void* buf, const size_t* counts,
                                  hvds_dtype_t dtype, hvds_reduce_op_t op,
                                  const hvds_coll_opts_t* o);

/* In-place allgather of variable blocks: block r has bytes[r] bytes at the offset that is the
 * sum of bytes[0..r-1]; this rank's block is filled on entry, every block on return. */
hvds_result_t hvds__allgatherv(hvds_p2p_t* p, void* buf, const size_t* bytes,
                               const hvds_coll_opts_t* o);

/* Broadcast bytes of buf from root to every rank (binomial tree, pipelined for large buffers). */
hvds_result_t hvds__broadcast(hvds_p2p_t* p, void* buf, size_t bytes, int root,
                              const hvds_coll_opts_t* o);

/* Personalized exchange: send_bytes[r] bytes from sendbuf + send_off[r] go to rank r, and
 * recv_bytes[r] bytes from rank r land at recvbuf + recv_off[r]. */
hvds_result_t hvds__alltoallv(hvds_p2p_t* p, const void* sendbuf, const size_t* send_bytes,
                              const size_t* send_off, void* recvbuf, const size_t* recv_bytes,
                              const size_t* recv_off, const hvds_coll_opts_t* o);

/* Gather variable-size byte strings at root: on root, recvbuf receives bytes[r] from rank r at
 * the offset sum(bytes[0..r-1]) (root's own block must already be in place, or sendbuf is
 * copied there). bytes must be known on root; non-roots pass their own size in bytes[rank]. */
hvds_result_t hvds__gatherv(hvds_p2p_t* p, const void* sendbuf, void* recvbuf,
                            const size_t* bytes, int root, const hvds_coll_opts_t* o);

/* Every rank waits until every rank arrived. */
hvds_result_t hvds__barrier(hvds_p2p_t* p, const hvds_coll_opts_t* o);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_COLLECTIVES_H_ */
