/* The device library's interface: what libhvdsparse_device.so (ops/nccl and cuda/, built only
 * where CUDA is) offers to the runtime and the launcher, which load it at run time so that they
 * never depend on CUDA or NCCL themselves (docs/gpu.md).
 *
 * The library exports one function, HVDS_DEVICE_API_SYMBOL, returning a table whose first field
 * is the interface's version; a loader refuses a table of another version.
 */
#ifndef HVDS_OPS_DEVICE_API_H_
#define HVDS_OPS_DEVICE_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HVDS_DEVICE_API_VERSION 11
#define HVDS_DEVICE_API_SYMBOL "hvds_device_api"
#define HVDS_DEVICE_LIBRARY_NAME "libhvdsparse_device.so"
/* The oldest NCCL the backend uses (ncclGetLastError, ncclInProgress). */
#define HVDS_DEVICE_MIN_NCCL_VERSION 21400

/* Sends bytes of buf from rank root of a group to its other ranks (the runtime's control
 * plane); blocks; 0 on success. */
typedef int (*hvds_device_bcast_fn)(void* bctx, void* buf, size_t bytes, int root);
/* An operation's completion, on the library's completion thread: status 0 (HVDS_SUCCESS) or
 * the failure (an hvds_result_t) with its message, valid during the call. */
typedef void (*hvds_device_done_fn)(void* arg, int status, const char* message);

typedef struct {
  int version; /* HVDS_DEVICE_API_VERSION */
  /* NCCL's version code of the libnccl this process resolved (e.g. 22809); 0 if unreadable. */
  int (*nccl_version)(void);
  /* The CUDA runtime's version (e.g. 12080); 0 if unreadable. */
  int (*cuda_runtime_version)(void);
  /* How many GPUs the CUDA runtime sees; 0 with the runtime's reason in why when none. */
  int (*device_count)(char* why, size_t why_len);

  /* Version 2: staging device tensors through host memory (HVDSPARSE_GPU_OPERATIONS=host).
   * Each call that can fail returns 0, or -1 with the CUDA runtime's reason in why. */
  /* bytes of page-locked host memory, or NULL. */
  void* (*host_alloc)(size_t bytes, char* why, size_t why_len);
  void (*host_free)(void* host);
  /* Copies bytes of GPU device's memory to host once the work queued so far on stream (a
   * cudaStream_t as an integer; 0 the default stream) is done; returns when the copy is. */
  int (*copy_to_host)(void* host, const void* device_memory, size_t bytes, int device,
                      int64_t stream, char* why, size_t why_len);
  /* Copies bytes of host memory to GPU device's memory in stream's order; returns when done,
   * so that the host memory may be reused and later work on stream sees the bytes. */
  int (*copy_to_device)(void* device_memory, const void* host, size_t bytes, int device,
                        int64_t stream, char* why, size_t why_len);

  /* Version 3: the NCCL route (HVDSPARSE_GPU_OPERATIONS=nccl). */
  /* GPU device's context (its stream and completion thread), made on the first call and kept
   * for the process; NULL with why. timeout_ms > 0: an operation still running that long after
   * the one before it completed fails and aborts its communicator. */
  void* (*context)(int device, int timeout_ms, char* why, size_t why_len);
  /* The communicator of a group of size ranks in which this is rank: every rank of the group
   * calls it; rank 0's NCCL id reaches the others by bcast. NULL with why. */
  void* (*comm_create)(void* context, int rank, int size, hvds_device_bcast_fn bcast, void* bctx,
                       char* why, size_t why_len);
  /* Waits for the communicator's operations (their done calls returned), then frees it. */
  void (*comm_destroy)(void* comm);
  /* An event recorded now on stream of device: the producer's inputs are ready when it
   * completes. NULL with why. Freed by event_free, which may come before it completed. */
  void* (*ready_event)(int device, int64_t stream, char* why, size_t why_len);
  void (*event_free)(void* event);
  /* The fused allreduce of n tensors (counts[i] elements of dtype, an hvds_dtype_t; inputs[i]
   * NULL contributes zeros, outputs[i] may equal inputs[i]): times prescale, reduced with op
   * (an hvds_reduce_op_t; Average divides by the group's size), times postscale. The
   * context's stream waits for the nready events first; done is called when the results are
   * in place. -1 with why when nothing was enqueued (done is then never called). */
  int (*allreduce)(void* comm, const void* const* inputs, void* const* outputs,
                   const size_t* counts, int n, int dtype, int op, double prescale,
                   double postscale, void* const* ready, int nready, hvds_device_done_fn done,
                   void* done_arg, char* why, size_t why_len);

  /* Version 4: staging without holding the caller. */
  /* Queues a copy of bytes of GPU device's memory to page-locked host memory on stream, after
   * the work queued there so far, and returns at once; *done gets an event (as ready_event's,
   * freed by event_free) that completes with the copy, or NULL when bytes is 0. -1 with why. */
  int (*copy_to_host_async)(void* host, const void* device_memory, size_t bytes, int device,
                            int64_t stream, void** done, char* why, size_t why_len);
  /* Returns once event completed; -1 with why when the work before it failed. */
  int (*event_wait)(void* event, char* why, size_t why_len);

  /* Version 5: the route's allgather and reducescatter (what DeAR's buckets run), with
   * allreduce's ready events, completion and failures. */
  /* Every rank's block (bytes[r] bytes; this rank's from input) into output, back to back in
   * rank order. output NULL: the library's scratch (the rank still takes part). */
  int (*allgather)(void* comm, const void* input, void* output, const size_t* bytes,
                   void* const* ready, int nready, hvds_device_done_fn done, void* done_arg,
                   char* why, size_t why_len);
  /* input holds every rank's block back to back (counts[r] elements of dtype); output gets
   * this rank's block reduced over the group: times prescale, op (Average divides by the
   * group's size), times postscale. input is left as it was. output NULL: scratch. */
  int (*reducescatter)(void* comm, const void* input, void* output, const size_t* counts, int dtype,
                       int op, double prescale, double postscale, void* const* ready, int nready,
                       hvds_device_done_fn done, void* done_arg, char* why, size_t why_len);

  /* Version 6: broadcast and alltoall on the route, with the same events and completion. */
  /* bytes of buf on rank root of the group to every rank's buf, in place. */
  int (*broadcast)(void* comm, void* buf, size_t bytes, int root, void* const* ready, int nready,
                   hvds_device_done_fn done, void* done_arg, char* why, size_t why_len);
  /* The personalized exchange: input holds a block for every rank back to back in rank order
   * (send_bytes[r] bytes to rank r); output gets the block of every rank back to back in rank
   * order (recv_bytes[r] bytes from rank r). output NULL: scratch (the rank still takes part). */
  int (*alltoall)(void* comm, const void* input, const size_t* send_bytes, void* output,
                  const size_t* recv_bytes, void* const* ready, int nready,
                  hvds_device_done_fn done, void* done_arg, char* why, size_t why_len);

  /* Version 7: handles complete at launch (HOROVOD_ENABLE_ASYNC_COMPLETION). */
  /* An event recorded now on the stream of comm's GPU, after the work launched there so far:
   * it completes with that work. NULL with why. Freed by event_free. */
  void* (*launch_event)(void* comm, char* why, size_t why_len);
  /* Makes stream of GPU device wait for event on the GPU; the host does not wait. -1 with why. */
  int (*stream_wait)(void* event, int device, int64_t stream, char* why, size_t why_len);

  /* Version 8: Horovod's hierarchical allreduce (HOROVOD_HIERARCHICAL_ALLREDUCE=1). */
  /* A communicator made of local (this host's ranks) and cross (the ranks with this local rank
   * on the other hosts), both from comm_create on this GPU, whose allreduces reduce-scatter
   * over local, allreduce each block over cross and all-gather over local. It owns the two
   * (comm_destroy frees them with it); only allreduce runs on it. NULL with why, the two then
   * left to the caller. */
  void* (*comm_pair)(void* local, void* cross, char* why, size_t why_len);

  /* Version 9: Compression.topk on the GPU (the cuda/ kernel). */
  /* Queued on stream of GPU device after the work there so far, and returns at once: acc +=
   * grad (grad may be NULL), then the k entries of acc largest in magnitude (ties to the lower
   * indices, zeros never) go to indices (index_dtype an hvds_dtype_t, INT32 or INT64) and values
   * in increasing index order and are zeroed in acc. Slots left over when acc holds fewer than
   * k non-zeros get index 0 and value 0, so a sum over the k entries is right without the host
   * reading a count. dtype FLOAT32 or FLOAT64; n elements, k <= n. -1 with why. */
  int (*topk_feedback)(int device, int64_t stream, void* acc, const void* grad, int dtype, size_t n,
                       size_t k, void* indices, int index_dtype, void* values, char* why,
                       size_t why_len);

  /* Version 10: a framework that cannot name its stream (TensorFlow through DLPack). */
  /* Returns once every stream of GPU device has finished the work queued so far. -1 with why. */
  int (*synchronize)(int device, char* why, size_t why_len);

  /* Version 11: the quantizer on the GPU (the cuda/ kernels), for the quantized gathers a
   * binding builds from routed collectives. */
  /* hvds__quant_encode() (ops/quantize.h) of n values of dtype at src into the
   * hvds__quant_bytes(n, bits) bytes at dst, all memory of GPU device, queued on stream; the host
   * does not wait. The CPU encoder's bytes for the same values, bits and seed. -1 with why. */
  int (*quant_encode)(int device, int64_t stream, const void* src, size_t n, int dtype, int bits,
                      uint64_t seed, void* dst, char* why, size_t why_len);
  /* hvds__quant_decode() of n values encoded at bits from src into dst as dtype, likewise. */
  int (*quant_decode)(int device, int64_t stream, const void* src, size_t n, int bits, int dtype,
                      void* dst, char* why, size_t why_len);
} hvds_device_api_t;

typedef const hvds_device_api_t* (*hvds_device_api_fn)(void);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_OPS_DEVICE_API_H_ */
