/* Quantized gather blocks (sparse_quant.h). */
#include "sparse_quant.h"

#include "quantize.h"

size_t hvds__sparse_qblock_bytes(const hvds_sparse_layout_t* lay, size_t head, size_t n, int bits) {
  return sizeof(uint64_t) + hvds__pad8(head) + hvds__quant_bytes(n * lay->row, bits);
}

hvds_result_t hvds__sparse_qblock_pack(const hvds_sparse_layout_t* lay, int bits, uint64_t seed,
                                       const char* blk, size_t head, size_t n, char* dst) {
  size_t h = hvds__pad8(head);
  uint64_t nonzero = hvds__sparse_nonzero_rows(blk + h, n, hvds__sparse_row_bytes(lay));
  memcpy(dst, &nonzero, sizeof nonzero);
  dst += sizeof nonzero;
  memcpy(dst, blk, head);
  memset(dst + head, 0, h - head);
  if (n == 0) return HVDS_SUCCESS;
  return hvds__quant_encode(blk + h, n * lay->row, lay->dtype, bits, seed, dst + h);
}

hvds_result_t hvds__sparse_qblock_unpack(const hvds_sparse_layout_t* lay, int bits, const char* src,
                                         size_t head, size_t n, char* dst, uint64_t* nonzero) {
  size_t h = hvds__pad8(head), rows = n * hvds__sparse_row_bytes(lay);
  uint64_t count;
  memcpy(&count, src, sizeof count);
  *nonzero += count;
  src += sizeof count;
  memcpy(dst, src, h);
  memset(dst + h + rows, 0, hvds__pad8(rows) - rows);
  if (n == 0) return HVDS_SUCCESS;
  return hvds__quant_decode(src + h, n * lay->row, bits, lay->dtype, dst + h);
}

int hvds__sparse_qdense_rule(const hvds_sparse_layout_t* lay, size_t n, size_t len, int bits) {
  size_t dense = hvds__sparse_qblock_bytes(lay, 0, len, bits);
  return len > 0 &&
         dense <= hvds__sparse_qblock_bytes(lay, n * hvds__sparse_idx_bytes(lay), n, bits);
}
