/* Packed blocks for the gather phases that follow a full-precision reduce: indices delta-coded,
 * values quantized (SparCML section 4: for sparse streams only the values are quantized, indices
 * stay exact) or, with bits 0, as they are.
 *
 * A block is a head (a stream's indices, a ZEN bitmap, or nothing for a dense stream) of
 * `head` bytes, zero-padded to 8, followed by n rows of values padded to 8: the stream layout of
 * sparse_stream.h. Packed, it is
 *   [uint64 non-zero rows before quantization][uint64 head bytes H][H bytes, padded to 8]
 *   [hvds__quant_bytes(n * row, bits) bytes of quantized values (ops/quantize.h), or with bits 0
 *    the n rows as they are, padded to 8].
 * The row count lets the runtime learn the overlap from the union's size (a quantized value may
 * round to zero). A head of ascending indices is delta-coded (LEB128 varints of the gaps, the
 * first from 0): a 4-byte index is 8 times a 4-bit value's bytes and as large as a float32, and
 * the gaps of a sparse range fit in one or two bytes. Lossless: indices stay exact. Any other
 * head is copied. Each owner packs its reduced block once, the packed blocks are gathered (their
 * sizes exchanged first, since a varint head's size is known only once packed), and every rank,
 * the owner included, unpacks every block: all ranks hold the same decoded values, which are
 * never summed while quantized.
 */
#ifndef HVDS_SPARSE_QUANT_H_
#define HVDS_SPARSE_QUANT_H_

#include "sparse_stream.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a block holds, in the block layout. */
typedef struct {
  size_t n;    /* rows */
  size_t head; /* head bytes before padding: n * index bytes, a bitmap's bytes, or 0 */
  int indices; /* 1: the head is n strictly ascending indices (delta-coded when packed) */
} hvds_qblock_shape_t;

/* At most this many bytes for a packed block of shape s (a buffer for hvds__sparse_qblock_pack). */
size_t hvds__sparse_qblock_bound(const hvds_sparse_layout_t* lay, const hvds_qblock_shape_t* s,
                                 int bits);

/* Packs the block at blk (head, rows at pad8(head)) into dst, every byte up to *bytes written
 * (a multiple of 8); seed from hvds__quant_seed (one per block and operation).
 * HVDS_INVALID_ARGUMENT for a width or dtype the quantizer does not take. */
hvds_result_t hvds__sparse_qblock_pack(const hvds_sparse_layout_t* lay, int bits, uint64_t seed,
                                       const char* blk, const hvds_qblock_shape_t* s,
                                       char* dst /* OUT */, size_t* bytes /* OUT */);

/* Unpacks the packed block of `bytes` bytes at src into the block layout at dst (head, decoded
 * rows, zeroed padding) and adds its non-zero rows before quantization to *nonzero.
 * HVDS_INTERNAL_ERROR when the bytes do not hold a block of shape s (a peer sent something
 * else). Deterministic: every rank decodes the same bytes to the same values. */
hvds_result_t hvds__sparse_qblock_unpack(const hvds_sparse_layout_t* lay, int bits, const char* src,
                                         size_t bytes, const hvds_qblock_shape_t* s,
                                         char* dst /* OUT */, uint64_t* nonzero /* IN/OUT */);

/* Bytes of v as a LEB128 varint (1 to 10). */
size_t hvds__sparse_varint_bytes(uint64_t v);

/* The byte rule of a packed block (values quantized at bits, or as they are with 0): 1 when n
 * entries over len indices are no larger as a dense block than as a sparse one whose gaps are
 * all the average gap (len / n). Quantized values make the indices the larger part of a sparse
 * entry, so a range turns dense sooner than at full precision (past about a third full at 4
 * bits, where gaps take a byte). */
int hvds__sparse_qdense_rule(const hvds_sparse_layout_t* lay, size_t n, size_t len, int bits);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_SPARSE_QUANT_H_ */
