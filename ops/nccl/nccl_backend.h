/* The NCCL backend: GPU collectives for device tensors (docs/gpu.md).
 *
 * Three objects:
 *   - a context (hvds_nccl_ctx_t) per GPU: one CUDA stream on which every collective and kernel
 *     of the context runs, in call order, and a completion thread that watches the stream so the
 *     caller (the coordinator) never waits for the GPU;
 *   - a communicator (hvds_nccl_comm_t) per group of ranks: an ncclComm_t, created collectively
 *     with NCCL's unique id sent over the existing control plane (a broadcast callback, or any
 *     hvds_p2p_t communicator: the world, a process set's view, the local or cross group);
 *   - the job's set of communicators (hvds_nccl_groups_t): global, local, cross, and one per
 *     process set, created on first use.
 *
 * Collectives are asynchronous. Each waits on the caller's ready events (the framework's
 * "inputs are computed" events) on the context's stream, enqueues the NCCL calls (and the
 * cuda/ kernels for packing and scaling), records a completion event and returns. The
 * completion thread calls done(arg, status, message) when that event completes, or when the
 * communicator fails or times out. A call that fails before anything is enqueued returns the
 * error and never calls done.
 *
 * Threading: the collective entry points and comm creation must be called from one thread at a
 * time per context (the coordinator); done callbacks run on the context's completion thread, in
 * enqueue order, and must not call back into this API. hvds__nccl_comm_abort may be called from
 * any thread.
 *
 * Reductions: Sum, Average (Sum, then 1/size through postscale, as Horovod and the CPU path do),
 * Min, Max, Product on uint8, int8, int32, int64, float16, bfloat16, float32, float64, and bool
 * (sum/max = or, min/product = and, as ops/reduce.c). int16 and uint16 have no NCCL type:
 * HVDS_NOT_SUPPORTED. NCCL's min/max NaN handling is NCCL's, not ops/reduce.c's.
 */
#ifndef HVDS_NCCL_BACKEND_H_
#define HVDS_NCCL_BACKEND_H_

#include <stddef.h>
#include <stdint.h>

#include "hvds_cuda.h"
#include "hvdsparse.h"
#include "p2p.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hvds_nccl_ctx hvds_nccl_ctx_t;
typedef struct hvds_nccl_comm hvds_nccl_comm_t;
typedef struct hvds_nccl_groups hvds_nccl_groups_t;

/* NCCL's version code of the library linked (e.g. 22809), 0 if it cannot be read. */
int hvds__nccl_version(void);

/* ---- Context ---- */

/* Creates the context of device: makes it the calling thread's current device, creates the
 * stream (non-blocking with respect to the legacy default stream) and starts the completion
 * thread. timeout_ms > 0: an operation still running that long after the one before it
 * completed fails with HVDS_TIMEOUT and its communicator is aborted; 0: no limit. */
hvds_result_t hvds__nccl_ctx_create(int device, int timeout_ms, hvds_nccl_ctx_t** out /* OUT */);
/* Waits until every enqueued operation completed (and its done callback returned), then stops
 * the completion thread and frees the context. Communicators must be destroyed first. Accepts
 * NULL. */
void hvds__nccl_ctx_destroy(hvds_nccl_ctx_t* ctx);
/* The context's stream (a cudaStream_t). Work the caller puts on it runs in order with the
 * collectives. */
hvds_cuda_stream_t hvds__nccl_ctx_stream(const hvds_nccl_ctx_t* ctx);
int hvds__nccl_ctx_device(const hvds_nccl_ctx_t* ctx);
/* Blocks until every operation enqueued so far completed and its callback returned. Returns
 * HVDS_SUCCESS (failures were reported to the callbacks). Not from a done callback. */
hvds_result_t hvds__nccl_ctx_sync(hvds_nccl_ctx_t* ctx);

/* ---- Communicators ---- */

/* Sends bytes of buf from root to every rank of the group (the control plane). Blocks. */
typedef hvds_result_t (*hvds_nccl_bcast_fn)(void* bctx, void* buf, size_t bytes, int root);

/* Creates the communicator of a group of size ranks in which this is rank: rank 0 makes NCCL's
 * unique id, bcast hands it to the others, and every rank joins (blocks until all did). Called
 * on every rank of the group. On failure *out is NULL and the message is logged. */
hvds_result_t hvds__nccl_comm_create(hvds_nccl_ctx_t* ctx, int rank, int size,
                                     hvds_nccl_bcast_fn bcast, void* bctx,
                                     hvds_nccl_comm_t** out /* OUT */);
/* As above over a point-to-point communicator: the group is p's ranks, the id travels by
 * hvds__broadcast on p with tag. */
hvds_result_t hvds__nccl_comm_create_p2p(hvds_nccl_ctx_t* ctx, hvds_p2p_t* p, uint64_t tag,
                                         hvds_nccl_comm_t** out /* OUT */);
int hvds__nccl_comm_rank(const hvds_nccl_comm_t* comm);
int hvds__nccl_comm_size(const hvds_nccl_comm_t* comm);
/* The message of the communicator's failure, or "" while it works. */
const char* hvds__nccl_comm_error(const hvds_nccl_comm_t* comm);
/* Aborts the communicator (ncclCommAbort): pending operations fail with HVDS_SHUT_DOWN unless
 * they failed already, later calls fail at once. Any thread; idempotent. */
void hvds__nccl_comm_abort(hvds_nccl_comm_t* comm);
/* Waits for the communicator's pending operations, then frees it. Accepts NULL. */
void hvds__nccl_comm_destroy(hvds_nccl_comm_t* comm);

/* ---- The job's communicators ---- */

typedef enum { HVDS_NCCL_GLOBAL = 0, HVDS_NCCL_LOCAL = 1, HVDS_NCCL_CROSS = 2 } hvds_nccl_group_t;

/* Creates the global communicator over world, and the local and cross ones over their views
 * (NULL: not created; a rank passes NULL for local exactly when every rank does, likewise for
 * cross). Tags tag, tag + 1, tag + 2 are used on the respective p2p communicators. Called on
 * every rank. */
hvds_result_t hvds__nccl_groups_create(hvds_nccl_ctx_t* ctx, hvds_p2p_t* world, hvds_p2p_t* local,
                                       hvds_p2p_t* cross, uint64_t tag,
                                       hvds_nccl_groups_t** out /* OUT */);
/* The global, local or cross communicator; NULL when it was not created. */
hvds_nccl_comm_t* hvds__nccl_groups_get(const hvds_nccl_groups_t* g, hvds_nccl_group_t which);
/* The communicator of process set id (0: the global one), created over pset (the set's p2p
 * view, with tag) on the first call on each member rank, then cached. */
hvds_result_t hvds__nccl_groups_pset(hvds_nccl_groups_t* g, int32_t id, hvds_p2p_t* pset,
                                     uint64_t tag, hvds_nccl_comm_t** out /* OUT */);
/* Destroys process set id's communicator, if any (every member calls it). */
void hvds__nccl_groups_remove_pset(hvds_nccl_groups_t* g, int32_t id);
/* Destroys every communicator. Accepts NULL. */
void hvds__nccl_groups_destroy(hvds_nccl_groups_t* g);

/* ---- Collectives ---- */

/* Completion of one operation: status HVDS_SUCCESS, or the failure and its message (valid
 * during the call only). Runs on the completion thread. */
typedef void (*hvds_nccl_done_fn)(void* arg, hvds_result_t status, const char* message);

/* What every collective takes besides its data. */
typedef struct {
  void* const* ready_events; /* cudaEvent_t each, recorded by the producer of the inputs; the
                                stream waits for them first. NULL or nready 0: none */
  int nready;
  hvds_nccl_done_fn done; /* NULL: no callback (use hvds__nccl_ctx_sync) */
  void* done_arg;
} hvds_nccl_call_t;

#define HVDS_NCCL_CALL_INIT \
  { NULL, 0, NULL, NULL }

/* recvbuf = prescale * sendbuf, reduced over the group, times postscale (for Average the caller
 * passes Sum's op and postscale / size, or op Average, which divides here). sendbuf == recvbuf
 * is in place. count elements of dtype. */
hvds_result_t hvds__nccl_allreduce(hvds_nccl_comm_t* comm, const void* sendbuf, void* recvbuf,
                                   size_t count, hvds_dtype_t dtype, hvds_reduce_op_t op,
                                   double prescale, double postscale, const hvds_nccl_call_t* call);
/* The fused allreduce: packs the n inputs into d_fusion (scaled by prescale), allreduces it in
 * place, unpacks into the n outputs (scaled by postscale, and 1/size for Average). inputs[i]
 * and outputs[i] have the same count; outputs may equal inputs. Input data NULL: zeros (a
 * joined rank). d_fusion holds the sum of the counts. */
hvds_result_t hvds__nccl_allreduce_fused(hvds_nccl_comm_t* comm, const hvds_cuda_buf_t* inputs,
                                         const hvds_cuda_buf_t* outputs, int n, void* d_fusion,
                                         hvds_dtype_t dtype, hvds_reduce_op_t op, double prescale,
                                         double postscale, const hvds_nccl_call_t* call);
/* Horovod's hierarchical allreduce of the n inputs: local holds the ranks of this host, cross
 * the ranks with this local rank on the other hosts, both of one context (one GPU, one
 * stream). The inputs are packed into d_fusion (times prescale), reduce-scattered over local,
 * each block allreduced over cross, all-gathered over local, and unpacked (times postscale;
 * Average divides by both sizes). d_fusion holds the sum of the counts rounded up to a
 * multiple of local's size. A failure or timeout of either communicator aborts both. */
hvds_result_t hvds__nccl_allreduce_hierarchical(hvds_nccl_comm_t* local, hvds_nccl_comm_t* cross,
                                                const hvds_cuda_buf_t* inputs,
                                                const hvds_cuda_buf_t* outputs, int n,
                                                void* d_fusion, hvds_dtype_t dtype,
                                                hvds_reduce_op_t op, double prescale,
                                                double postscale, const hvds_nccl_call_t* call);
/* Reduce-scatter: buf holds size blocks back to back, block r counts[r] elements; recvbuf gets
 * this rank's block reduced (times prescale before and postscale after, 1/size for Average).
 * buf is scratch (scaled in place when prescale != 1). Equal counts use ncclReduceScatter,
 * others one ncclReduce per block in a group. recvbuf may be this rank's block of buf. */
hvds_result_t hvds__nccl_reducescatter(hvds_nccl_comm_t* comm, void* buf, void* recvbuf,
                                       const size_t* counts, hvds_dtype_t dtype,
                                       hvds_reduce_op_t op, double prescale, double postscale,
                                       const hvds_nccl_call_t* call);
/* All-gather of variable blocks: block r has bytes[r] bytes; sendbuf is this rank's; recvbuf
 * gets all blocks back to back. Equal sizes use ncclAllGather, others one ncclBroadcast per
 * block in a group. sendbuf may be this rank's block of recvbuf. */
hvds_result_t hvds__nccl_allgather(hvds_nccl_comm_t* comm, const void* sendbuf, void* recvbuf,
                                   const size_t* bytes, const hvds_nccl_call_t* call);
/* bytes of buf from root (a rank of the group) to every rank, in place. */
hvds_result_t hvds__nccl_broadcast(hvds_nccl_comm_t* comm, void* buf, size_t bytes, int root,
                                   const hvds_nccl_call_t* call);
/* Personalized exchange by grouped ncclSend/ncclRecv: sbytes[r] bytes at sendbuf + soff[r] go
 * to rank r, rbytes[r] bytes from rank r land at recvbuf + roff[r]. Zero-byte blocks are not
 * sent (both sides know the sizes). */
hvds_result_t hvds__nccl_alltoallv(hvds_nccl_comm_t* comm, const void* sendbuf,
                                   const size_t* sbytes, const size_t* soff, void* recvbuf,
                                   const size_t* rbytes, const size_t* roff,
                                   const hvds_nccl_call_t* call);
/* One uint64 to and from every rank (d_send, d_recv: size device uint64 each): the size
 * exchange before a sparse payload whose counts are on the GPU. */
hvds_result_t hvds__nccl_alltoall_u64(hvds_nccl_comm_t* comm, const uint64_t* d_send,
                                      uint64_t* d_recv, const hvds_nccl_call_t* call);
/* Sparse exchange (ZEN's push, ops/sparse/sparse_internal.h's alltoallv on the GPU): block r of
 * d_send is a sparse stream of scount[r] entries of lay (hvds__sstream_bytes(lay, scount[r], 0)
 * bytes), blocks back to back in rank order; the blocks from every rank arrive likewise in
 * d_recv (rcount[r] entries from rank r). Grouped send/recv. */
hvds_result_t hvds__nccl_sparse_exchange(hvds_nccl_comm_t* comm, const hvds_sparse_layout_t* lay,
                                         const void* d_send, const uint64_t* scount, void* d_recv,
                                         const uint64_t* rcount, const hvds_nccl_call_t* call);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_NCCL_BACKEND_H_ */
