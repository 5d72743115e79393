/* The sparse stream (sparse_stream.h): layout checks, memory, scatter to dense, and the radix
 * sort everything uses. Merging and splitting live in sparse_merge.c, the caller's input in
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

/* ---- Radix sort ---- */

/* One stable counting pass on byte `shift` of the keys; returns 0 when every key has the same
 * byte there (nothing moved). */
static int radix_pass(const uint64_t* k, const uint64_t* v, uint64_t* k2, uint64_t* v2, size_t n,
                      int shift) {
  size_t count[257] = {0};
  for (size_t i = 0; i < n; i++) count[((k[i] >> shift) & 0xff) + 1]++;
  for (int d = 0; d < 256; d++)
    if (count[d + 1] == n) return 0;
  for (int d = 0; d < 256; d++) count[d + 1] += count[d];
  for (size_t i = 0; i < n; i++) {
    size_t at = count[(k[i] >> shift) & 0xff]++;
    k2[at] = k[i];
    v2[at] = v[i];
  }
  return 1;
}

hvds_result_t hvds__sparse_sort_pairs(uint64_t* key, uint64_t* val, size_t n, uint64_t max_key) {
  if (n < 2) return HVDS_SUCCESS;
  uint64_t* tmp = malloc(2 * n * sizeof(uint64_t));
  if (tmp == NULL) return HVDS_SYSTEM_ERROR;
  uint64_t *k = key, *v = val, *k2 = tmp, *v2 = tmp + n;
  for (int shift = 0; shift < 64 && (max_key >> shift) != 0; shift += 8) {
    if (!radix_pass(k, v, k2, v2, n, shift)) continue;
    uint64_t *tk = k, *tv = v;
    k = k2, v = v2, k2 = tk, v2 = tv;
  }
  if (k != key) {
    memcpy(key, k, n * sizeof(uint64_t));
    memcpy(val, v, n * sizeof(uint64_t));
  }
  free(tmp);
  return HVDS_SUCCESS;
}

/* Radix passes for keys up to max_key (one per byte). */
static double radix_passes(double max_key) {
  double p = 0;
  for (; max_key >= 1 && p < 8; p++) max_key /= 256;
  return p;
}

/* The bitmap ranking's steps: mark n, a prefix count over the range's 64-bit words, rank n,
 * list the n marks over the words again. */
static double rank_steps(double n, double max_key) { return 3 * n + 2 * (max_key / 64 + 1); }

double hvds__sparse_sort_steps(double n, double max_key, int unique) {
  double radix = 2 * n * radix_passes(max_key);
  if (!unique) return radix;
  double rank = rank_steps(n, max_key);
  return rank < radix ? rank : radix;
}

/* Ranks through the radix sort of (key, position) pairs; the sorted keys replace the keys. */
static hvds_result_t ranks_by_sort(uint64_t* key, size_t n, uint64_t max_key, uint64_t* rank) {
  uint64_t* pos = malloc(n * sizeof(uint64_t));
  if (pos == NULL) return HVDS_SYSTEM_ERROR;
  for (size_t i = 0; i < n; i++) pos[i] = i;
  hvds_result_t rc = hvds__sparse_sort_pairs(key, pos, n, max_key);
  for (size_t t = 0; rc == HVDS_SUCCESS && t < n; t++) rank[pos[t]] = t;
  free(pos);
  return rc;
}

hvds_result_t hvds__sparse_rank_unique(uint64_t* key, size_t n, uint64_t max_key, uint64_t* rank) {
  if (n == 0) return HVDS_SUCCESS;
  if (rank_steps((double)n, (double)max_key) >= 2 * (double)n * radix_passes((double)max_key))
    return ranks_by_sort(key, n, max_key, rank);
  size_t words = (size_t)(max_key >> 6) + 1;
  uint64_t* bits = calloc(2 * words, sizeof(uint64_t));
  if (bits == NULL) return HVDS_SYSTEM_ERROR;
  uint64_t* before = bits + words;
  for (size_t i = 0; i < n; i++) bits[key[i] >> 6] |= 1ull << (key[i] & 63);
  uint64_t acc = 0;
  for (size_t w = 0; w < words; w++) {
    before[w] = acc;
    acc += hvds__popcount64(bits[w]);
  }
  for (size_t i = 0; i < n; i++) {
    uint64_t w = key[i] >> 6;
    rank[i] = before[w] + hvds__popcount64(bits[w] & ((1ull << (key[i] & 63)) - 1));
  }
  size_t t = 0;  // the marks, in order, are the sorted keys
  for (size_t w = 0; w < words; w++)
    for (uint64_t b = bits[w]; b != 0; b &= b - 1)
      key[t++] = (w << 6) + (uint64_t)__builtin_ctzll(b);
  free(bits);
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
