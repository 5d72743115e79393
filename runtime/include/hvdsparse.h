/* hvdsparse: the public C API.
 *
 * A Horovod-compatible runtime. A background coordinator thread negotiates which named tensors
 * are ready on every rank, fuses them and runs the collective. Every collective is asynchronous:
 * the enqueue call returns a handle at once, and hvds_wait() blocks until it is done.
 *
 * Thread-safety: every function may be called from any thread unless its comment says otherwise.
 * Before hvds_init() the query functions return -1 and the enqueue functions HVDS_INVALID_USAGE.
 */
#ifndef HVDSPARSE_H_
#define HVDSPARSE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HVDS_VERSION_STRING "0.1.0"
#define HVDS_MAX_DIMS 8

/* One status type for the whole API; hvds_result_str() names each. */
#define HVDS_RESULT_LIST(X)                                                   \
  X(HVDS_SUCCESS, 0, "success")                                               \
  X(HVDS_IN_PROGRESS, 1, "in progress")                                       \
  X(HVDS_INVALID_ARGUMENT, 2, "invalid argument")                             \
  X(HVDS_INVALID_USAGE, 3, "invalid usage")                                   \
  X(HVDS_PRECONDITION_ERROR, 4, "precondition error (ranks disagree)")       \
  X(HVDS_SYSTEM_ERROR, 5, "system error")                                     \
  X(HVDS_TIMEOUT, 6, "timeout")                                               \
  X(HVDS_REMOTE_ERROR, 7, "remote error (a peer failed)")                     \
  X(HVDS_SHUT_DOWN, 8, "runtime shut down")                                   \
  X(HVDS_INTERNAL_ERROR, 9, "internal error")                                 \
  X(HVDS_NOT_SUPPORTED, 10, "not supported")

typedef enum {
#define HVDS_RESULT_ENUM(name, value, text) name = value,
  HVDS_RESULT_LIST(HVDS_RESULT_ENUM)
#undef HVDS_RESULT_ENUM
} hvds_result_t;

/* Data types. Values 0..9 are Horovod's DataType numbering; bfloat16 is ours. */
typedef enum {
  HVDS_UINT8 = 0,
  HVDS_INT8 = 1,
  HVDS_UINT16 = 2,
  HVDS_INT16 = 3,
  HVDS_INT32 = 4,
  HVDS_INT64 = 5,
  HVDS_FLOAT16 = 6,
  HVDS_FLOAT32 = 7,
  HVDS_FLOAT64 = 8,
  HVDS_BOOL = 9,
  HVDS_BFLOAT16 = 10,
  HVDS_DTYPE_COUNT = 11
} hvds_dtype_t;

/* Reduction operations, Horovod's ReduceOp numbering. Adasum is not supported. */
typedef enum {
  HVDS_AVERAGE = 0,
  HVDS_SUM = 1,
  HVDS_ADASUM = 2,
  HVDS_MIN = 3,
  HVDS_MAX = 4,
  HVDS_PRODUCT = 5,
  HVDS_REDUCE_OP_MAX_ = 0x7fffffff /* keeps internal values (ops/reduce.h) inside the enum's range */
} hvds_reduce_op_t;

/* A tensor view: the caller owns the memory. Shape is copied at enqueue. device -1 is the CPU,
 * 0 and up a GPU: the dense collectives stage GPU tensors through host memory
 * (HVDSPARSE_GPU_OPERATIONS, docs/gpu.md) when the device library is installed. */
typedef struct {
  void* data;
  hvds_dtype_t dtype;
  int32_t device;
  int32_t ndim;
  int64_t shape[HVDS_MAX_DIMS];
} hvds_tensor_t;

/* Handles are small positive integers; 0 is never a valid handle. */
typedef int64_t hvds_handle_t;

/* Allocates an output whose shape is known only after negotiation (allgather, alltoall,
 * reducescatter). Called on the coordinator thread; returns NULL to fail the operation.
 * The caller of the enqueue owns the returned memory. */
typedef void* (*hvds_alloc_fn)(void* ctx, hvds_dtype_t dtype, int32_t ndim, const int64_t* shape,
                               size_t bytes);

/* Options shared by every collective. Initialise with HVDS_OP_OPTIONS_INIT. Fields are only ever
 * added at the end: the runtime reads a field only when `size` covers it, so a caller built
 * against an older header (a smaller size) gets the defaults for the fields it does not have. */
typedef struct {
  size_t size;             /* sizeof(hvds_op_options_t) */
  uint32_t version;        /* 5 (1: up to alloc_ctx; 2: up to sparse_detect; 3: up to
                              sparse_quant_bits; 4: up to ordered) */
  const char* name;        /* negotiation key, identical on every rank; required */
  int32_t process_set;     /* 0 is the global set */
  hvds_reduce_op_t op;     /* allreduce and reducescatter */
  double prescale;         /* multiply inputs before reducing */
  double postscale;        /* multiply the result after reducing */
  int32_t root_rank;       /* broadcast: rank relative to the process set */
  const int32_t* splits;   /* alltoall: rows sent to each rank of the set, or NULL for equal */
  int32_t nsplits;         /* number of entries in splits */
  hvds_alloc_fn alloc;     /* output allocator, or NULL for runtime-owned memory */
  void* alloc_ctx;         /* passed to alloc */
  /* Version 2: */
  const char* sparse_algorithm; /* sparse allreduce: forced algorithm by name, "auto" for the
                                   cost model, NULL for HVDSPARSE_SPARSE_ALGORITHM's default */
  int32_t sparse_detect;   /* allreduce of a dense tensor: 1 counts its non-zeros (rows for
                              ndim >= 2, elements for 1-D) and runs it as a sparse allreduce
                              when the cost model says that is cheaper; 0 never; -1
                              HVDSPARSE_SPARSE_DETECT's default (off) */
  /* Version 3: */
  int32_t sparse_quant_bits; /* sparse allreduce: 2, 4 or 8 quantizes the values of the gather
                                after the full-precision reduce (DSAR, split-allgather, ZEN;
                                docs/compression.md); 0 full precision. Identical on every
                                rank. */
  /* Version 4: */
  int32_t ordered;         /* 1: the ordered fast lane (allreduce, reducescatter, allgather).
                              Every rank submits its ordered operations of the set in the same
                              order with the same names, dtypes, ops and shapes (an allgather's
                              first dimension too); they skip per-tensor negotiation and run in
                              submission order, ahead of negotiated work. An operation whose
                              position holds a different one on another rank fails on every rank
                              with HVDS_PRECONDITION_ERROR. 0: negotiated. */
  /* Version 5: */
  int64_t stream; /* GPU tensors: the producer's CUDA stream (a cudaStream_t as an
                     integer; 0 the default stream). The input is read after the work
                     queued on it so far, and the result is ordered on it. */
} hvds_op_options_t;

#define HVDS_OP_OPTIONS_INIT                                                                     \
  {                                                                                              \
    sizeof(hvds_op_options_t), 5, NULL, 0, HVDS_SUM, 1.0, 1.0, 0, NULL, 0, NULL, NULL, NULL, -1, \
        0, 0, 0                                                                                  \
  }

/* ---- Lifecycle ---- */

/* Starts the runtime: reads rank and size from the environment (set by `hvdsparse run`),
 * rendezvous with every rank, starts the coordinator thread. Idempotent; works again after
 * hvds_shutdown() with a fresh rendezvous. Blocks until every rank has joined or the start
 * timeout passes. On error, hvds_last_error() says why. */
hvds_result_t hvds_init(void);

/* As hvds_init(), and registers static process sets: sets[i] has sizes[i] ranks, given one
 * after another in ranks. Every rank must pass the same sets in the same order. */
hvds_result_t hvds_init_with_process_sets(const int32_t* ranks, const int32_t* sizes, int32_t n);

/* Stops the coordinator; pending operations fail with HVDS_SHUT_DOWN. Safe to call twice. */
hvds_result_t hvds_shutdown(void);
/* Says why this rank is about to stop, before hvds_shutdown(): e.g. "after an uncaught
 * RuntimeError: ...". The first rank of the job to stop with a reason publishes it, and the
 * operations its peers still had pending fail naming it ("... Rank 1 stopped first, after an
 * uncaught RuntimeError: ..."). NULL or "" clears it; cleared again at init. */
hvds_result_t hvds_set_shutdown_reason(const char* reason);
/* A binding's default for the coordinator thread's scheduling ("normal", "auto", "realtime";
 * HVDSPARSE_COORDINATOR_PRIORITY's values), for a job whose pipeline needs it (DeAR overlaps
 * the reduction with the next forward only if the coordinator gets the core when its data
 * arrives). The environment's setting, when there is one, wins. Applies from the coordinator's
 * next cycle and at every later init of the process. HVDS_INVALID_ARGUMENT for another value. */
hvds_result_t hvds_prefer_coordinator_priority(const char* mode);
int hvds_is_initialized(void);
/* Elastic jobs (`hvdsparse run --min-np`/`--host-discovery-script`): 1 when the launcher has
 * published a membership newer than the one this rank joined at its last init (workers were
 * added or removed: re-initialize to join it), 0 when not, -1 when the runtime is not running
 * or the job is not elastic. Asks the launcher's store: call it on one rank and broadcast the
 * answer, as hvd.elastic's commit() does. Thread-safe. */
int hvds_elastic_hosts_updated(void);

/* The message of the last failed call on this thread (thread-local, valid until the next call). */
const char* hvds_last_error(void);
const char* hvds_result_str(hvds_result_t r);

/* ---- Queries: -1 before init ---- */
int hvds_rank(void);
int hvds_size(void);
int hvds_local_rank(void);
int hvds_local_size(void);
int hvds_cross_rank(void);
int hvds_cross_size(void);
int hvds_is_homogeneous(void);

/* ---- What was built ---- */
int hvds_gloo_built(void);
int hvds_nccl_built(void); /* NCCL version code (e.g. 22703), 0 when not built */
int hvds_cuda_built(void);
/* 1 when GPU tensors' collectives run on the GPU by NCCL (HVDSPARSE_GPU_OPERATIONS=nccl and the
 * device library loads), 0 when they are staged through host memory (docs/gpu.md). */
int hvds_gpu_operations_routed(void);
/* Returns once every stream of GPU device finished the work queued so far: for a framework that
 * cannot name the stream its tensors are written on (TensorFlow's tensors seen through DLPack)
 * before their memory goes to a collective, and before it reads a result that completed at
 * launch. device -1 (the CPU) returns at once; HVDS_NOT_SUPPORTED without the device library. */
hvds_result_t hvds_device_synchronize(int32_t device);
int hvds_mpi_built(void);
int hvds_hwloc_built(void);

/* ---- Collectives: each returns a handle in *handle on success ---- */

/* output has input's shape and dtype; output->data may equal input->data (in place). */
hvds_result_t hvds_allreduce_async(const hvds_tensor_t* input, hvds_tensor_t* output,
                                   const hvds_op_options_t* opts, hvds_handle_t* handle);

/* Sparse tensors. */
typedef enum { HVDS_SPARSE_COO = 0, HVDS_SPARSE_ROWS = 1 } hvds_sparse_format_t;
/* nnz entries of a dense tensor of shape dense_shape. COO: indices are flat element indices in
 * [0, numel(dense_shape)), values has nnz elements. ROWS (embeddings): indices are row ids in
 * [0, dense_shape[0]), values has nnz rows of numel(dense_shape[1:]) elements. Any order;
 * duplicates are summed. An index outside the dense shape fails the operation on every rank.
 * The memory is the caller's and must stay valid and unchanged until the operation is done. */
typedef struct {
  hvds_sparse_format_t format;
  const void* indices;      /* nnz of index_dtype */
  hvds_dtype_t index_dtype; /* HVDS_INT32 or HVDS_INT64 */
  const void* values;
  hvds_dtype_t dtype;
  int64_t nnz;
  int32_t dense_ndim;
  int64_t dense_shape[HVDS_MAX_DIMS];
  int32_t device;           /* -1: CPU */
} hvds_sparse_tensor_t;

/* Sum or Average (opts->op) of every rank's sparse tensor. dense_out non-NULL: the result is
 * written there densely (dense_shape, dtype). dense_out NULL: the result stays sparse; read it with
 * hvds_handle_sparse_result() after the wait. opts->sparse_algorithm forces an algorithm by name
 * ("dense", "allgather", "ssar_recursive_doubling", "ssar_split_allgather", "dsar_split_allgather",
 * "zen"; NULL or "auto": the cost model picks; HVDSPARSE_SPARSE_ALGORITHM sets the default).
 * Negotiated by name like an allreduce; the dense shape, dtype, index dtype, format, op and
 * algorithm must agree across ranks (nnz may differ); never fused with other tensors. prescale
 * and postscale multiply the result. */
hvds_result_t hvds_sparse_allreduce_async(const hvds_sparse_tensor_t* input, hvds_tensor_t* dense_out,
                                          const hvds_op_options_t* opts, hvds_handle_t* handle);

/* ZEN's hash key for this job: the one its partition function (a keyed permutation of the
 * dense indices, ops/sparse/zen_hash.h) uses on every rank, agreed at init (rank 0's). A binding
 * that runs ZEN from other collectives (the GPU's, docs/compression.md) partitions by it as the
 * runtime does. 0 when the runtime is not running. */
uint64_t hvds_zen_key(void);

/* n tensors negotiated and completed together, named "<name>_<i>of<n>"; one handle. */
hvds_result_t hvds_grouped_allreduce_async(int32_t n, const hvds_tensor_t* inputs,
                                           hvds_tensor_t* outputs, const hvds_op_options_t* opts,
                                           hvds_handle_t* handle);

/* Concatenates along dimension 0; the first dimension may differ per rank. */
hvds_result_t hvds_allgather_async(const hvds_tensor_t* input, const hvds_op_options_t* opts,
                                   hvds_handle_t* handle);

/* In place: tensor->data on the root is sent; on the others it is overwritten. */
hvds_result_t hvds_broadcast_async(hvds_tensor_t* tensor, const hvds_op_options_t* opts,
                                   hvds_handle_t* handle);

/* Sends opts->splits[i] rows to rank i; the received splits come from hvds_handle_splits(). */
hvds_result_t hvds_alltoall_async(const hvds_tensor_t* input, const hvds_op_options_t* opts,
                                  hvds_handle_t* handle);

/* Reduces, then rank i keeps dim0/size rows (+1 if i < dim0 % size), as Horovod does. */
hvds_result_t hvds_reducescatter_async(const hvds_tensor_t* input, const hvds_op_options_t* opts,
                                       hvds_handle_t* handle);

/* n tensors reduced and scattered together; outputs come from hvds_handle_output(h, i, ...). */
hvds_result_t hvds_grouped_reducescatter_async(int32_t n, const hvds_tensor_t* inputs,
                                               const hvds_op_options_t* opts,
                                               hvds_handle_t* handle);

hvds_result_t hvds_barrier_async(int32_t process_set, hvds_handle_t* handle);

/* This rank has no more work: it contributes zeros to the others' allreduces until every rank
 * joined. hvds_handle_join_rank() gives the last rank that joined. */
hvds_result_t hvds_join_async(hvds_handle_t* handle);

/* ---- Handles ---- */

/* 1 when done, 0 when pending, -1 for an unknown handle. Never blocks. */
int hvds_poll(hvds_handle_t handle);

/* Blocks until done (timeout_ms < 0: no limit; HVDS_TIMEOUT when it passes). Returns the
 * operation's status; on failure hvds_handle_error() holds the message, which names the tensor
 * and the rank when known. While the coordinator is idle the waiting thread runs the runtime's
 * next cycle itself (HVDSPARSE_CALLER_RUNS), so a wait may end up to one cycle after its
 * timeout. */
hvds_result_t hvds_wait(hvds_handle_t handle, int32_t timeout_ms);
const char* hvds_handle_error(hvds_handle_t handle);

/* Output i (allgather, alltoall, reducescatter). The memory is the alloc callback's, or else
 * runtime-owned until hvds_release() unless taken with hvds_handle_take_output(). */
hvds_result_t hvds_handle_output(hvds_handle_t handle, int32_t i, hvds_tensor_t* output /* OUT */);
/* Transfers runtime-owned output memory to the caller, who frees it with hvds_free(). */
void* hvds_handle_take_output(hvds_handle_t handle, int32_t i);
void hvds_free(void* p);
/* Alltoall: number of received splits, written to *splits (valid until release). */
int32_t hvds_handle_splits(hvds_handle_t handle, const int32_t** splits /* OUT */);
int32_t hvds_handle_join_rank(hvds_handle_t handle);
/* HOROVOD_ENABLE_ASYNC_COMPLETION: a GPU operation on the NCCL route completes its handle at
 * launch, its GPU work still running. hvds_handle_gpu_work() gives the GPU of a finished
 * handle's work in flight, or -1 when it has none (every other handle); then
 * hvds_handle_stream_wait() makes stream (a cudaStream_t as an integer, 0 the default stream)
 * of that GPU wait for the work, the host waiting for nothing: what synchronize does with the
 * caller's current stream. HVDS_SUCCESS also when there is nothing to wait for. */
int32_t hvds_handle_gpu_work(hvds_handle_t handle);
hvds_result_t hvds_handle_stream_wait(hvds_handle_t handle, int64_t stream);
/* The sparse result of a completed hvds_sparse_allreduce_async with no dense_out: nnz entries,
 * sorted unique indices (the input's index dtype) and their values (rows for ROWS). When the
 * result came out dense (*is_dense = 1), *indices is NULL and values holds every element of the
 * dense shape. Memory: from opts->alloc (called twice: indices then values; once, values only,
 * when the result is dense) or runtime-owned, valid until hvds_release(). *algorithm: the name
 * of the algorithm that ran (static storage). Any OUT pointer may be NULL. Returns
 * HVDS_IN_PROGRESS while pending, HVDS_INVALID_ARGUMENT for an unknown handle or one without a
 * sparse result, or the operation's failure. */
hvds_result_t hvds_handle_sparse_result(hvds_handle_t handle, int64_t* nnz, const void** indices,
                                        const void** values, int32_t* is_dense,
                                        const char** algorithm);

/* Forgets the handle. Safe on pending handles (the result is discarded) and on 0. */
void hvds_release(hvds_handle_t handle);

/* ---- Process sets ---- */
/* Must be called on every rank in the same order; blocks until registered. */
hvds_result_t hvds_add_process_set(const int32_t* ranks, int32_t n, int32_t* id /* OUT */);
hvds_result_t hvds_remove_process_set(int32_t id);
int hvds_process_set_rank(int32_t id);     /* -1 when this rank is not a member */
int hvds_process_set_size(int32_t id);     /* -1 for an unknown set */
int hvds_process_set_included(int32_t id); /* 1, 0, or -1 for an unknown set */
int32_t hvds_process_set_ranks(int32_t id, int32_t* ranks /* OUT, size() entries */);
int32_t hvds_number_of_process_sets(void);
int32_t hvds_process_set_ids(int32_t* ids /* OUT */);

/* ---- Timeline ---- */
hvds_result_t hvds_start_timeline(const char* path, int mark_cycles);
hvds_result_t hvds_stop_timeline(void);

/* ---- Gradient compression ---- */
/* How hvds_topk_feedback() selects: k entries; with sample > 0 a threshold from a random
 * sample (the sample_rank-th largest magnitude of `sample` entries drawn with `seed`, 1 <=
 * sample_rank <= sample) narrows the candidates; 0 selects exactly over every entry. The result
 * is the exact top k either way. */
typedef struct {
  int64_t k;
  int64_t sample;
  int64_t sample_rank;
  uint64_t seed;
} hvds_topk_plan_t;

/* Top-k with error feedback on host memory (Compression.topk): acc += grad (grad may be NULL),
 * then the k entries of acc largest in magnitude (ties to lower indices; zeros never, so fewer
 * when acc has fewer non-zeros) are written to indices and values in increasing index order and
 * zeroed in acc. acc, grad and values: n elements of dtype HVDS_FLOAT32 or HVDS_FLOAT64 (values:
 * room for k); indices: room for k of index_dtype, HVDS_INT32 (n <= INT32_MAX) or HVDS_INT64.
 * *count: entries written; exact (may be NULL): 1 when the selection ran over every entry (no
 * sample, or the sample's threshold missed). Needs no hvds_init(). HVDS_INVALID_ARGUMENT names
 * the bad argument and changes nothing. */
hvds_result_t hvds_topk_feedback(void* acc, const void* grad, hvds_dtype_t dtype, int64_t n,
                                 const hvds_topk_plan_t* plan, void* indices,
                                 hvds_dtype_t index_dtype, void* values, int64_t* count,
                                 int32_t* exact);

/* hvds_topk_feedback() on GPU device's memory by the device library's kernel, queued on stream
 * (a cudaStream_t as an integer, 0 the default stream) after the work queued there so far; the
 * host does not wait. The selection is exact (no sample). indices and values always get
 * min(k, n) entries: when acc holds fewer non-zeros, the slots left over hold index 0 and value
 * 0, which add nothing to a sum. HVDS_NOT_SUPPORTED without the device library (docs/gpu.md);
 * HVDS_INVALID_ARGUMENT as hvds_topk_feedback(); HVDS_SYSTEM_ERROR with CUDA's reason. */
hvds_result_t hvds_topk_feedback_device(int32_t device, int64_t stream, void* acc, const void* grad,
                                        hvds_dtype_t dtype, int64_t n, int64_t k, void* indices,
                                        hvds_dtype_t index_dtype, void* values);

/* ---- Stochastic quantization (the sparse path's; docs/compression.md) ---- */
/* Bytes of n values encoded at bits (2, 4 or 8): a float32 scale per 1024 values and bits per
 * value, padded to a multiple of 8; 0 for n <= 0 or another width. */
int64_t hvds_quantized_bytes(int64_t n, int32_t bits);
/* Encodes n values of dtype (FLOAT16, BFLOAT16, FLOAT32 or FLOAT64) at src into the
 * hvds_quantized_bytes(n, bits) bytes at dst, rounded stochastically with draws from seed: the
 * bytes of the runtime's quantized sparse gathers. device -1: host memory, on the caller's
 * thread; device >= 0: memory of that GPU, queued on stream (a cudaStream_t as an integer) by
 * the device library's kernel, the host not waiting; the same bytes either way. Needs no
 * hvds_init(). HVDS_INVALID_ARGUMENT (named; nothing written) for another width or dtype, a
 * negative n or a NULL buffer; HVDS_NOT_SUPPORTED for a GPU without the device library;
 * HVDS_SYSTEM_ERROR with CUDA's reason. */
hvds_result_t hvds_quantize(int32_t device, int64_t stream, const void* src, int64_t n,
                            hvds_dtype_t dtype, int32_t bits, uint64_t seed, void* dst);
/* Decodes n values encoded at bits from src into dst as dtype; device and stream as
 * hvds_quantize(). Deterministic: the same bytes decode to the same values everywhere (a bucket
 * that held NaN or an infinity decodes to NaN). */
hvds_result_t hvds_dequantize(int32_t device, int64_t stream, const void* src, int64_t n,
                              int32_t bits, hvds_dtype_t dtype, void* dst);

/* ---- Helpers ---- */
size_t hvds_dtype_size(hvds_dtype_t dtype);
const char* hvds_dtype_name(hvds_dtype_t dtype); /* Horovod's names: "FLOAT32", ... */

#ifdef __cplusplus
}
#endif
#endif /* HVDSPARSE_H_ */
