/* Quantized blocks for the gather phases that follow a full-precision reduce (SparCML section 4:
 * for sparse streams only the values are quantized, indices stay exact).
 *
 * A block is a head (a stream's indices, a ZEN bitmap, or nothing for a dense stream) of `head`
 * bytes, zero-padded to 8, followed by n rows of values padded to 8: the stream layout of
 * sparse_stream.h. Packed, it is an 8-byte count of its non-zero rows before quantization (a
 * value may round to zero, and the runtime learns the overlap from the union's size), the same
 * head, and hvds__quant_bytes(n * row, bits) bytes (ops/quantize.h). Each owner packs its reduced
 * block once, the packed blocks are gathered, and every rank, the owner included, unpacks every
 * block: all ranks hold the same decoded values, which are never summed while quantized.
 */
#ifndef HVDS_SPARSE_QUANT_H_
#define HVDS_SPARSE_QUANT_H_

#include "sparse_stream.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of a packed block: 8 + pad8(head) + hvds__quant_bytes(n * row, bits). */
size_t hvds__sparse_qblock_bytes(const hvds_sparse_layout_t* lay, size_t head, size_t n, int bits);

/* Packs the block at blk (head bytes, rows at pad8(head)) into dst, every byte written; seed
 * from hvds__quant_seed (one per block and operation). HVDS_INVALID_ARGUMENT for a width or
 * dtype the quantizer does not take. */
hvds_result_t hvds__sparse_qblock_pack(const hvds_sparse_layout_t* lay, int bits, uint64_t seed,
                                       const char* blk, size_t head, size_t n, char* dst /* OUT */);

/* Unpacks a packed block at src into the block layout at dst (head, decoded rows, zeroed
 * padding) and adds its non-zero rows before quantization to *nonzero. Deterministic: every
 * rank decodes the same bytes to the same values. */
hvds_result_t hvds__sparse_qblock_unpack(const hvds_sparse_layout_t* lay, int bits, const char* src,
                                         size_t head, size_t n, char* dst /* OUT */,
                                         uint64_t* nonzero /* IN/OUT */);

/* The byte rule with quantized values: 1 when n entries over len indices are no smaller as a
 * dense quantized block than as a sparse one. Quantized values make indices the larger part of
 * a sparse entry, so a range turns dense much sooner (about len / 9 entries at 4 bits with
 * 4-byte indices). */
int hvds__sparse_qdense_rule(const hvds_sparse_layout_t* lay, size_t n, size_t len, int bits);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_SPARSE_QUANT_H_ */
