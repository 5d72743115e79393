/* The CUDA kernels of hvdsparse behind a C API: fusion pack/unpack with scaling, 16-bit float
 * casts, element-wise reduce and scale, non-zero extraction (stream compaction), ZEN's hash
 * partition (counting sort), ZEN's bitmap encode/decode, row scatter/gather, top-k with error
 * feedback, and stochastic quantization.
 *
 * Built only when CMake finds a CUDA compiler (library hvds_cuda, docs/gpu.md). The CPU kernels of
 * ops/ are the reference: every result here is bitwise identical to theirs (ops/reduce.c,
 * ops/sparse/, ops/topk.c, ops/quantize.c), except that a NaN produced by arithmetic is the GPU's
 * canonical NaN rather than the operand's payload, and that the atomic scatter-add of duplicate
 * float indices depends on the order of the atomics.
 *
 * Conventions of every function:
 *   - d_* pointers are device memory (or managed memory); everything else is host memory.
 *   - Work is enqueued on `stream` and the call returns without waiting for it (asynchronous, like
 *     cudaMemcpyAsync); outputs are valid once the stream reaches that point. No function
 *     allocates memory: functions that need scratch take a device workspace of the size that
 *     their *_workspace() query returns (d_ws, ws_bytes; 256-byte aligned is enough).
 *   - Returns HVDS_SUCCESS, HVDS_INVALID_ARGUMENT (a NULL pointer, a workspace too small, a bad
 *     layout), HVDS_NOT_SUPPORTED (a dtype/op pair without a kernel) or HVDS_SYSTEM_ERROR (a CUDA
 *     error: logged with CUDA's message, and the sticky error cleared). Argument errors are found
 *     before anything is enqueued.
 *   - Thread-safe: the functions keep no state; concurrent calls on different streams are fine.
 */
#ifndef HVDS_CUDA_H_
#define HVDS_CUDA_H_

#include <stddef.h>
#include <stdint.h>

#include "sparse_stream.h"
#include "zen_hash.h"
#include "hvdsparse.h"

#ifdef __cplusplus
extern "C" {
#endif

/* cudaStream_t without including the CUDA headers (it is the same type). NULL is the legacy
 * default stream. */
typedef struct CUstream_st* hvds_cuda_stream_t;

/* Number of CUDA devices visible to this process; 0 when there is no device or no driver. Never
 * fails. */
int hvds__cuda_device_count(void);

/* ---- Fusion buffer ---- */

/* One tensor of a fusion: count elements at data (device). */
typedef struct {
  void* data;   /* NULL in hvds__cuda_pack: the tensor contributes zeros (a joined rank) */
  size_t count; /* elements */
} hvds_cuda_buf_t;

/* Gathers n tensors into d_fused back to back (tensor i starts after the counts of tensors
 * 0..i-1, no padding, as runtime/execute.c packs the CPU fusion buffer), multiplying each
 * element by factor (hvds__scale's arithmetic; factor 1.0 is a plain copy). One kernel launch
 * per 64 tensors. */
hvds_result_t hvds__cuda_pack(const hvds_cuda_buf_t* tensors, int n, void* d_fused,
                              hvds_dtype_t dtype, double factor, hvds_cuda_stream_t stream);
/* The inverse: scatters d_fused into the n tensors, multiplying by factor. Tensors with NULL
 * data are skipped (their bytes stay in d_fused). */
hvds_result_t hvds__cuda_unpack(const void* d_fused, const hvds_cuda_buf_t* tensors, int n,
                                hvds_dtype_t dtype, double factor, hvds_cuda_stream_t stream);

/* ---- Element-wise kernels (ops/reduce.h on the GPU) ---- */

/* d_buf[i] *= factor, as hvds__scale() (factor 1.0 is a no-op). Every dtype. */
hvds_result_t hvds__cuda_scale(void* d_buf, size_t count, hvds_dtype_t dtype, double factor,
                               hvds_cuda_stream_t stream);
/* d_dst[i] = d_dst[i] op d_src[i], as hvds__reduce(): Sum, Average (sums), Min, Max, Product for
 * every dtype, and ops/reduce.h's BAND/BOR for integers and bool. d_dst == d_src is allowed;
 * other overlaps are not. */
hvds_result_t hvds__cuda_reduce(void* d_dst, const void* d_src, size_t count, hvds_dtype_t dtype,
                                hvds_reduce_op_t op, hvds_cuda_stream_t stream);
/* Converts count elements between float32 and float16 or bfloat16 (either direction; the same
 * dtype on both sides is a copy), as hvds__half_to_float() and friends. Other pairs:
 * HVDS_NOT_SUPPORTED. d_src and d_dst must not overlap. */
hvds_result_t hvds__cuda_cast(const void* d_src, hvds_dtype_t src_dtype, void* d_dst,
                              hvds_dtype_t dst_dtype, size_t count, hvds_cuda_stream_t stream);

/* ---- Non-zero extraction (dense -> sparse stream) ----
 * The dense tensor is lay->dim rows of lay->row values of lay->dtype. An entry is non-zero when
 * any of its row's values is non-zero in the dtype's arithmetic (-0.0 is zero, NaN is not): COO
 * is row 1 (elements), row-sparse is row D (rows). */

/* Workspace bytes for hvds__cuda_nonzero_count and hvds__cuda_nonzero_compact over lay. */
size_t hvds__cuda_nonzero_workspace(const hvds_sparse_layout_t* lay);
/* *d_count (one device uint64) = the number of non-zero entries. */
hvds_result_t hvds__cuda_nonzero_count(const hvds_sparse_layout_t* lay, const void* d_dense,
                                       uint64_t* d_count, void* d_ws, size_t ws_bytes,
                                       hvds_cuda_stream_t stream);
/* Stream compaction: the non-zero entries in ascending index order, indices (lay->index_dtype)
 * to d_indices and their rows to d_values, the number of entries to *d_count. At most capacity
 * entries are written; *d_count is the full number, so a caller that sized by an earlier count
 * can check. The output is a sorted unique stream as ops/sparse/ builds them (no dense switch). */
hvds_result_t hvds__cuda_nonzero_compact(const hvds_sparse_layout_t* lay, const void* d_dense,
                                         size_t capacity, void* d_indices, void* d_values,
                                         uint64_t* d_count, void* d_ws, size_t ws_bytes,
                                         hvds_cuda_stream_t stream);

/* ---- ZEN (ops/sparse/zen.c on the GPU) ----
 * h is ZEN's keyed hash, filled on the CPU by hvds__zen_hash_init(h, lay->dim, seed); the
 * kernels compute the same hash as ops/sparse/zen_hash.c (ops/sparse/zen_hash_shared.h). */

/* Workspace bytes for hvds__cuda_zen_partition of n entries among P owners. */
size_t hvds__cuda_zen_partition_workspace(const hvds_sparse_layout_t* lay, size_t n, int P);
/* ZEN's push partition: a stable counting sort of n entries (d_idx, d_vals: n rows) by owner,
 * owner = hvds__zen_owner(dim, P, hvds__zen_hash(h, index)). Block j (the entries owned by j, in
 * input order) is entries [d_offsets[j], d_offsets[j + 1]) of d_idx_out and d_vals_out;
 * d_offsets has P + 1 device uint64. Entries with an index outside [0, dim) are dropped:
 * d_offsets[P] is the number kept (n for valid input). */
hvds_result_t hvds__cuda_zen_partition(const hvds_zen_hash_t* h, int P,
                                       const hvds_sparse_layout_t* lay, const void* d_idx,
                                       const void* d_vals, size_t n, void* d_idx_out,
                                       void* d_vals_out, uint64_t* d_offsets, void* d_ws,
                                       size_t ws_bytes, hvds_cuda_stream_t stream);

/* Bytes of a ZEN bitmap over a hashed range of len positions: pad8(ceil(len / 8)). */
size_t hvds__cuda_bitmap_bytes(size_t len);
/* Workspace bytes for hvds__cuda_bitmap_encode (n entries) and _decode (n set bits) over a
 * hashed range of len positions. */
size_t hvds__cuda_bitmap_workspace(const hvds_sparse_layout_t* lay, size_t len, size_t n);
/* ZEN's pull encoding of an owner's partition: n entries with distinct indices whose hashed
 * positions y lie in [lo, lo + len). d_map (hvds__cuda_bitmap_bytes(len) bytes, 4-byte
 * aligned) gets bit y - lo set, least significant bit of each byte first, padding zero;
 * d_vals_out gets the n rows in hashed order: zen.c's bitmap block is d_map followed by
 * d_vals_out. Entries hashing outside the range are dropped. */
hvds_result_t hvds__cuda_bitmap_encode(const hvds_zen_hash_t* h, const hvds_sparse_layout_t* lay,
                                       uint64_t lo, uint64_t len, const void* d_idx,
                                       const void* d_vals, size_t n, void* d_map, void* d_vals_out,
                                       void* d_ws, size_t ws_bytes, hvds_cuda_stream_t stream);
/* Decodes a bitmap block with n set bits: d_idx_out (n indices of lay->index_dtype, may be
 * NULL) gets the index hvds__zen_hash_inv(h, lo + bit) of each set bit in hashed order (the
 * order of the block's rows), and when d_dense is not NULL each row of d_vals is written to its
 * index's row of d_dense (lay->dim rows; other rows untouched). Bits at or past len are
 * ignored. */
hvds_result_t hvds__cuda_bitmap_decode(const hvds_zen_hash_t* h, const hvds_sparse_layout_t* lay,
                                       uint64_t lo, uint64_t len, const void* d_map,
                                       const void* d_vals, size_t n, void* d_idx_out, void* d_dense,
                                       void* d_ws, size_t ws_bytes, hvds_cuda_stream_t stream);

/* ---- Scatter and gather of rows ---- */

typedef enum {
  HVDS_CUDA_SCATTER_COPY = 0,      /* dense row = value row */
  HVDS_CUDA_SCATTER_ADD = 1,       /* dense row += value row; indices distinct (a stream's) */
  HVDS_CUDA_SCATTER_ADD_ATOMIC = 2 /* += with atomics: duplicate indices allowed; float32,
                                      float64, float16, bfloat16, int32, int64 only */
} hvds_cuda_scatter_mode_t;

/* d_dense (lay->dim rows) at row d_idx[i] combined with row i of d_vals, for n entries: the GPU
 * form of hvds__sstream_to_dense (COPY into zeros) and hvds__sstream_add_into (ADD; HVDS_SUM of
 * the dtype). Entries with an index outside [0, dim) are skipped. */
hvds_result_t hvds__cuda_scatter(const hvds_sparse_layout_t* lay, const void* d_idx,
                                 const void* d_vals, size_t n, void* d_dense,
                                 hvds_cuda_scatter_mode_t mode, hvds_cuda_stream_t stream);
/* d_vals_out row i = d_dense row d_idx[i], for n entries (indices in [0, dim)). */
hvds_result_t hvds__cuda_gather_rows(const hvds_sparse_layout_t* lay, const void* d_dense,
                                     const void* d_idx, size_t n, void* d_vals_out,
                                     hvds_cuda_stream_t stream);

/* ---- Top-k with error feedback (ops/topk.h on the GPU) ---- */

/* Workspace bytes for hvds__cuda_topk_feedback over n elements (any dtype). */
size_t hvds__cuda_topk_workspace(size_t n);
/* hvds__topk_feedback() with a plan without a sample, on device buffers: d_acc += d_grad (d_grad
 * may be NULL), then the min(k, n) entries of d_acc largest in magnitude (magnitude = the bit
 * pattern with the sign cleared, so NaN ranks above infinity; ties to the lower indices; zeros
 * never, so fewer when d_acc holds fewer non-zeros) go to d_indices (index_dtype HVDS_INT32, for
 * n <= INT32_MAX, or HVDS_INT64) and d_values in increasing index order, and are zeroed in d_acc.
 * *d_count (one device uint64) = the number selected. dtype HVDS_FLOAT32 or HVDS_FLOAT64 (else
 * HVDS_NOT_SUPPORTED); d_indices and d_values hold min(k, n) entries and must not overlap d_acc.
 * Equal to the CPU in everything but this: a NaN made by acc + grad is the GPU's canonical NaN,
 * whose magnitude key is the largest, so with more NaNs than k the NaNs sent can differ. */
hvds_result_t hvds__cuda_topk_feedback(void* d_acc, const void* d_grad, hvds_dtype_t dtype,
                                       size_t n, size_t k, void* d_indices,
                                       hvds_dtype_t index_dtype, void* d_values, uint64_t* d_count,
                                       void* d_ws, size_t ws_bytes, hvds_cuda_stream_t stream);

/* ---- Stochastic quantization (ops/quantize.h on the GPU) ---- */

/* hvds__quant_encode() on device buffers: n values of dtype (float16, bfloat16, float32,
 * float64) at d_src into the hvds__quant_bytes(n, bits) bytes at d_dst, every byte written. The
 * bytes are the CPU encoder's for the same values, bits and seed. No workspace; d_dst needs no
 * alignment. HVDS_INVALID_ARGUMENT for what the CPU encoder refuses (a width other than 2, 4, 8;
 * another dtype) and for NULL buffers when n > 0. */
hvds_result_t hvds__cuda_quant_encode(const void* d_src, size_t n, hvds_dtype_t dtype, int bits,
                                      uint64_t seed, void* d_dst, hvds_cuda_stream_t stream);
/* hvds__quant_decode() on device buffers: the n values encoded at d_src as dtype into d_dst. The
 * values are the CPU decoder's, except that a NaN bucket decodes to the GPU's canonical NaN. */
hvds_result_t hvds__cuda_quant_decode(const void* d_src, size_t n, int bits, hvds_dtype_t dtype,
                                      void* d_dst, hvds_cuda_stream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_CUDA_H_ */
