/* The sparse stream (sparse_stream.h): layout checks, memory and scatter to dense. Orderings
 * live in sparse_sort.c, merging and splitting in sparse_merge.c, the caller's input in
 * sparse_input.c. */
#include "sparse_stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reduce.h"
#include "sparse_pool.h"

hvds_result_t hvds__sparse_layout_check(const hvds_sparse_layout_t* lay, char* err, size_t errlen) {
  size_t vsz = hvds__dtype_bytes(lay->dtype);
  if (vsz == 0 || hvds__reduce(NULL, NULL, 0, lay->dtype, HVDS_SUM) != HVDS_SUCCESS) {
    snprintf(err, errlen, "sparse: unknown value dtype %d", (int)lay->dtype);
    return HVDS_INVALID_ARGUMENT;
  }
  if (lay->index_dtype != HVDS_INT32 && lay->index_dtype != HVDS_INT64) {
    snprintf(err, errlen, "sparse: index dtype %d is not int32 or int64", (int)lay->index_dtype);
    return HVDS_INVALID_ARGUMENT;
  }
  if (lay->row == 0) {
    snprintf(err, errlen, "sparse: row width is 0");
    return HVDS_INVALID_ARGUMENT;
  }
  uint64_t max_dim = lay->index_dtype == HVDS_INT32 ? (uint64_t)INT32_MAX + 1 : (uint64_t)INT64_MAX;
  if ((uint64_t)lay->dim > max_dim) {
    snprintf(err, errlen, "sparse: dim %zu is not addressable with %s indices", lay->dim,
             lay->index_dtype == HVDS_INT32 ? "int32" : "int64");
    return HVDS_INVALID_ARGUMENT;
  }
  if (lay->row > SIZE_MAX / 8 / vsz || (lay->dim > 0 && lay->row * vsz > SIZE_MAX / 8 / lay->dim)) {
    snprintf(err, errlen, "sparse: dim %zu x row %zu values overflow the address space", lay->dim,
             lay->row);
    return HVDS_INVALID_ARGUMENT;
  }
  return HVDS_SUCCESS;
}

size_t hvds__sparse_idx_bytes(const hvds_sparse_layout_t* lay) {
  return lay->index_dtype == HVDS_INT32 ? 4 : 8;
}

size_t hvds__sparse_row_bytes(const hvds_sparse_layout_t* lay) {
  return lay->row * hvds__dtype_bytes(lay->dtype);
}

int hvds__sparse_dense_rule(const hvds_sparse_layout_t* lay, size_t n, size_t len) {
  if (len == 0) return 0;
  unsigned __int128 rb = hvds__sparse_row_bytes(lay);
  return (unsigned __int128)n * (hvds__sparse_idx_bytes(lay) + rb) >= (unsigned __int128)len * rb;
}

size_t hvds__sparse_part_lo(size_t lo, size_t len, int m, int j) {
  return lo + (size_t)((unsigned __int128)len * (unsigned)j / (unsigned)m);
}

size_t hvds__sstream_bytes(const hvds_sparse_layout_t* lay, size_t n, int dense) {
  size_t vals = hvds__pad8(n * hvds__sparse_row_bytes(lay));
  return dense ? vals : hvds__pad8(n * hvds__sparse_idx_bytes(lay)) + vals;
}

char* hvds__sstream_val(const hvds_sparse_layout_t* lay, const hvds_sstream_t* s) {
  if (s->base == NULL || s->dense) return s->base;
  return s->base + hvds__pad8(s->n * hvds__sparse_idx_bytes(lay));
}

int64_t hvds__sstream_index(const hvds_sparse_layout_t* lay, const hvds_sstream_t* s, size_t i) {
  return s->dense ? (int64_t)(s->lo + i) : hvds__sparse_idx_get(lay, s->base, i);
}

/* First entry of sparse s with an index >= v (binary search). */
static size_t lower_bound(const hvds_sparse_layout_t* lay, const hvds_sstream_t* s, size_t v) {
  size_t a = 0, b = s->n;
  while (a < b) {
    size_t mid = a + (b - a) / 2;
    if ((size_t)hvds__sparse_idx_get(lay, s->base, mid) < v)
      a = mid + 1;
    else
      b = mid;
  }
  return a;
}

double hvds__sstream_range_imbalance(const hvds_sparse_layout_t* lay, const hvds_sstream_t* s,
                                     int m) {
  if (m <= 1 || s->n == 0 || s->dense) return 1.0;
  size_t largest = 0, start = 0;
  for (int j = 0; j < m; j++) {
    size_t end =
        j + 1 < m ? lower_bound(lay, s, hvds__sparse_part_lo(s->lo, s->len, m, j + 1)) : s->n;
    if (end - start > largest) largest = end - start;
    start = end;
  }
  return (double)m * (double)largest / (double)s->n;
}

/* ---- Memory ---- */

hvds_result_t hvds__sstream_alloc(const hvds_sparse_layout_t* lay, size_t lo, size_t len, size_t n,
                                  int dense, hvds_sstream_t* out) {
  *out = (hvds_sstream_t){lo, len, n, dense, NULL, NULL};
  size_t bytes = hvds__sstream_bytes(lay, n, dense);
  if (bytes == 0) return HVDS_SUCCESS;
  char* mem = hvds__sparse_buf_alloc(bytes);
  if (mem == NULL) return HVDS_SYSTEM_ERROR;
  out->base = out->owned = mem;
  hvds__sstream_zero_padding(lay, mem, n, dense);
  return HVDS_SUCCESS;
}

void hvds__sstream_zero_padding(const hvds_sparse_layout_t* lay, char* base, size_t n, int dense) {
  size_t rb = n * hvds__sparse_row_bytes(lay), ib = dense ? 0 : n * hvds__sparse_idx_bytes(lay);
  memset(base + ib, 0, hvds__pad8(ib) - ib);
  memset(base + hvds__pad8(ib) + rb, 0, hvds__pad8(rb) - rb);
}

void hvds__sstream_view(const hvds_sparse_layout_t* lay, char* base, size_t lo, size_t len,
                        size_t n, int dense, hvds_sstream_t* out) {
  *out = (hvds_sstream_t){lo, len, n, dense, n > 0 ? base : NULL, NULL};
}

void hvds__sstream_free(hvds_sstream_t* s) {
  hvds__sparse_buf_free(s->owned);
  *s = (hvds_sstream_t){s->lo, s->len, 0, 0, NULL, NULL};
}

hvds_result_t hvds__sstream_own(const hvds_sparse_layout_t* lay, hvds_sstream_t* s) {
  if (s->owned != NULL || s->base == NULL) return HVDS_SUCCESS;
  hvds_sstream_t t;
  if (hvds__sstream_alloc(lay, s->lo, s->len, s->n, s->dense, &t) != HVDS_SUCCESS)
    return HVDS_SYSTEM_ERROR;
  memcpy(t.base, s->base, hvds__sstream_bytes(lay, s->n, s->dense));
  *s = t;
  return HVDS_SUCCESS;
}

/* ---- Input normalization ---- */
void hvds__sstream_to_dense(const hvds_sparse_layout_t* lay, const hvds_sstream_t* s, void* dense) {
  size_t rb = hvds__sparse_row_bytes(lay);
  char* d = dense;
  const char* val = hvds__sstream_val(lay, s);
  if (s->dense) {
    memset(d, 0, s->lo * rb);
    memcpy(d + s->lo * rb, val, s->len * rb);
    memset(d + (s->lo + s->len) * rb, 0, (lay->dim - s->lo - s->len) * rb);
    return;
  }
  memset(d, 0, lay->dim * rb);
  for (size_t i = 0; i < s->n; i++)
    hvds__sparse_row_copy(d + (size_t)hvds__sparse_idx_get(lay, s->base, i) * rb, val + i * rb, rb);
}

/* Adds to k the non-zero words among n words of type T at p: one load each (the common row
 * widths). */
#define COUNT_WORDS(T)                        \
  for (size_t i = 0; i < n; i++) {            \
    T w;                                      \
    memcpy(&w, p + i * sizeof(T), sizeof(T)); \
    k += w != 0;                              \
  }

size_t hvds__sparse_nonzero_rows(const void* rows, size_t n, size_t rb) {
  const char* p = rows;
  size_t k = 0;
  switch (rb) {
    case 2:
      COUNT_WORDS(uint16_t);
      break;
    case 4:
      COUNT_WORDS(uint32_t);
      break;
    case 8:
      COUNT_WORDS(uint64_t);
      break;
    default:
      for (size_t i = 0; i < n; i++) k += !hvds__sparse_row_is_zero(p + i * rb, rb);
  }
  return k;
}
#undef COUNT_WORDS

size_t hvds__sstream_nonzero(const hvds_sparse_layout_t* lay, const hvds_sstream_t* s) {
  return hvds__sparse_nonzero_rows(hvds__sstream_val(lay, s), s->n, hvds__sparse_row_bytes(lay));
}
