/* Packed gather blocks: delta-coded indices, values quantized or as they are (sparse_quant.h). */
#include "sparse_quant.h"

#include <string.h>

#include "quantize.h"

#define VARINT_MAX 10 /* bytes of a 64-bit LEB128 value */

/* Writes n ascending indices as LEB128 gaps (the first from 0) at out; returns the bytes. */
static size_t delta_encode(const hvds_sparse_layout_t* lay, const char* idx, size_t n,
                           unsigned char* out) {
  size_t b = 0;
  uint64_t prev = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t v = (uint64_t)hvds__sparse_idx_get(lay, idx, i), gap = v - prev;
    prev = v;
    while (gap >= 0x80) {
      out[b++] = (unsigned char)(gap | 0x80);
      gap >>= 7;
    }
    out[b++] = (unsigned char)gap;
  }
  return b;
}

/* Reads n gaps from in[0, len) into ascending indices at idx; 0 when they do not fit. */
static int delta_decode(const hvds_sparse_layout_t* lay, const unsigned char* in, size_t len,
                        size_t n, char* idx) {
  size_t b = 0;
  uint64_t prev = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t gap = 0;
    for (int shift = 0;; shift += 7) {
      if (b >= len || shift >= 64) return 0;
      unsigned char c = in[b++];
      gap |= (uint64_t)(c & 0x7f) << shift;
      if (c < 0x80) break;
    }
    prev += gap;
    hvds__sparse_idx_set(lay, idx, i, (int64_t)prev);
  }
  return b == len;
}

/* Bytes of count rows of values in a packed block: quantized at bits, or as they are (0),
 * padded to 8. */
static size_t value_bytes(const hvds_sparse_layout_t* lay, size_t count, int bits) {
  return bits != 0 ? hvds__quant_bytes(count * lay->row, bits)
                   : hvds__pad8(count * hvds__sparse_row_bytes(lay));
}

/* Writes the values of n rows at src into dst: quantized at bits, or copied (0). */
static hvds_result_t encode_values(const hvds_sparse_layout_t* lay, int bits, uint64_t seed,
                                   const char* src, size_t n, char* dst) {
  if (bits == 0) {
    size_t b = n * hvds__sparse_row_bytes(lay);
    memcpy(dst, src, b);
    memset(dst + b, 0, hvds__pad8(b) - b);
    return HVDS_SUCCESS;
  }
  return hvds__quant_encode(src, n * lay->row, lay->dtype, bits, seed, dst);
}

size_t hvds__sparse_qblock_bound(const hvds_sparse_layout_t* lay, const hvds_qblock_shape_t* s,
                                 int bits) {
  size_t head = s->indices ? s->n * VARINT_MAX : s->head;
  return 2 * sizeof(uint64_t) + hvds__pad8(head) + value_bytes(lay, s->n, bits);
}

hvds_result_t hvds__sparse_qblock_pack(const hvds_sparse_layout_t* lay, int bits, uint64_t seed,
                                       const char* blk, const hvds_qblock_shape_t* s, char* dst,
                                       size_t* bytes) {
  const char* rows = blk + hvds__pad8(s->head);
  uint64_t word[2] = {hvds__sparse_nonzero_rows(rows, s->n, hvds__sparse_row_bytes(lay)), 0};
  char* head = dst + sizeof word;
  word[1] = s->indices ? delta_encode(lay, blk, s->n, (unsigned char*)head) : s->head;
  if (!s->indices) memcpy(head, blk, s->head);
  memcpy(dst, word, sizeof word);
  size_t h = hvds__pad8(word[1]);
  memset(head + word[1], 0, h - word[1]);
  *bytes = sizeof word + h + value_bytes(lay, s->n, bits);
  if (s->n == 0) return HVDS_SUCCESS;
  return encode_values(lay, bits, seed, rows, s->n, head + h);
}

hvds_result_t hvds__sparse_qblock_unpack(const hvds_sparse_layout_t* lay, int bits, const char* src,
                                         size_t bytes, const hvds_qblock_shape_t* s, char* dst,
                                         uint64_t* nonzero) {
  uint64_t word[2];
  if (bytes < sizeof word) return HVDS_INTERNAL_ERROR;
  memcpy(word, src, sizeof word);
  const char* head = src + sizeof word;
  size_t h = hvds__pad8(word[1]), values = value_bytes(lay, s->n, bits);
  if (word[1] > bytes || sizeof word + h + values != bytes || (!s->indices && word[1] != s->head))
    return HVDS_INTERNAL_ERROR;
  size_t dh = hvds__pad8(s->head), rows = s->n * hvds__sparse_row_bytes(lay);
  if (s->indices) {
    if (!delta_decode(lay, (const unsigned char*)head, word[1], s->n, dst))
      return HVDS_INTERNAL_ERROR;
  } else {
    memcpy(dst, head, s->head);
  }
  memset(dst + s->head, 0, dh - s->head);
  memset(dst + dh + rows, 0, hvds__pad8(rows) - rows);
  *nonzero += word[0];
  if (s->n == 0) return HVDS_SUCCESS;
  if (bits == 0) {
    memcpy(dst + dh, head + h, rows);
    return HVDS_SUCCESS;
  }
  return hvds__quant_decode(head + h, s->n * lay->row, bits, lay->dtype, dst + dh);
}

size_t hvds__sparse_varint_bytes(uint64_t v) {
  size_t b = 1;
  while (v >= 0x80) v >>= 7, b++;
  return b;
}

int hvds__sparse_qdense_rule(const hvds_sparse_layout_t* lay, size_t n, size_t len, int bits) {
  size_t dense = value_bytes(lay, len, bits);
  size_t gaps = n * hvds__sparse_varint_bytes(n > 0 ? len / n : len);
  return len > 0 && dense <= gaps + value_bytes(lay, n, bits);
}
