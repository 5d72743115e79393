/* Merging and splitting sparse streams (sparse_stream.h): SparCML's summation operator with the
 * dense switch on the exact union size (not |a| + |b|, which densifies overlapping inputs too
 * early), the deterministic tree merge, the partition split, and dense accumulation.
 *
 * Symmetry: every merge copies one operand and adds the other with the commutative sum kernel,
 * and an index present in only one operand is copied, never added to zero, so merge(a, b) and
 * merge(b, a) are bitwise identical (IEEE addition is commutative bit for bit; only NaN payloads
 * may differ). Partners that exchange and merge therefore hold the same stream. */
#include <stdlib.h>
#include <string.h>

#include "reduce.h"
#include "sparse_pool.h"
#include "sparse_stream.h"

/* Size of the union of two sparse streams' index sets. */
static size_t union_count(const hvds_sparse_layout_t* lay, const hvds_sstream_t* a,
                          const hvds_sstream_t* b) {
  size_t i = 0, j = 0, u = 0;
  while (i < a->n && j < b->n) {
    int64_t x = hvds__sparse_idx_get(lay, a->base, i), y = hvds__sparse_idx_get(lay, b->base, j);
    i += x <= y;
    j += y <= x;
    u++;
  }
  return u + (a->n - i) + (b->n - j);
}

/* Typed merges for the common COO layouts (one value per index, float32 or float64, int32 or
 * int64 indices): the union count and the merge run without per-entry layout dispatch, and the
 * merge's choice of source is a select, not a branch (the branch on which stream is ahead is
 * unpredictable for interleaved supports). Same results as two_pointer: an index in one operand
 * is copied, in both summed. */
#define DEF_TYPED_UNION(name, IT)                                      \
  static size_t name(const IT* a, size_t na, const IT* b, size_t nb) { \
    size_t i = 0, j = 0, u = 0;                                        \
    while (i < na && j < nb) {                                         \
      IT x = a[i], y = b[j];                                           \
      i += x <= y;                                                     \
      j += y <= x;                                                     \
      u++;                                                             \
    }                                                                  \
    return u + (na - i) + (nb - j);                                    \
  }
DEF_TYPED_UNION(union_i32, int32_t)
DEF_TYPED_UNION(union_i64, int64_t)

#define DEF_TYPED_MERGE(name, IT, VT)                                                              \
  static size_t name(const IT* ai, const VT* av, size_t na, const IT* bi, const VT* bv, size_t nb, \
                     IT* oi, VT* ov) {                                                             \
    size_t i = 0, j = 0, e = 0;                                                                    \
    while (i < na && j < nb) {                                                                     \
      IT x = ai[i], y = bi[j];                                                                     \
      VT p = av[i], q = bv[j];                                                                     \
      oi[e] = x < y ? x : y;                                                                       \
      ov[e++] = x == y ? p + q : x < y ? p : q;                                                    \
      i += x <= y;                                                                                 \
      j += y <= x;                                                                                 \
    }                                                                                              \
    if (i < na) { /* an empty stream's pointers may be NULL */                                     \
      memcpy(oi + e, ai + i, (na - i) * sizeof(IT));                                               \
      memcpy(ov + e, av + i, (na - i) * sizeof(VT));                                               \
      e += na - i;                                                                                 \
    }                                                                                              \
    if (j < nb) {                                                                                  \
      memcpy(oi + e, bi + j, (nb - j) * sizeof(IT));                                               \
      memcpy(ov + e, bv + j, (nb - j) * sizeof(VT));                                               \
      e += nb - j;                                                                                 \
    }                                                                                              \
    return e;                                                                                      \
  }
DEF_TYPED_MERGE(merge_i32_f32, int32_t, float)
DEF_TYPED_MERGE(merge_i64_f32, int64_t, float)
DEF_TYPED_MERGE(merge_i32_f64, int32_t, double)
DEF_TYPED_MERGE(merge_i64_f64, int64_t, double)

/* The typed merge for lay, or 0: which of the four (1 to 4). */
static int typed_kind(const hvds_sparse_layout_t* lay) {
  if (lay->row != 1 || (lay->dtype != HVDS_FLOAT32 && lay->dtype != HVDS_FLOAT64)) return 0;
  return (lay->index_dtype == HVDS_INT32 ? 1 : 2) + (lay->dtype == HVDS_FLOAT64 ? 2 : 0);
}

static size_t typed_union(int kind, const hvds_sstream_t* a, const hvds_sstream_t* b) {
  if (kind == 1 || kind == 3)
    return union_i32((const int32_t*)a->base, a->n, (const int32_t*)b->base, b->n);
  return union_i64((const int64_t*)a->base, a->n, (const int64_t*)b->base, b->n);
}

/* Merges into out's indices and the values at ov; returns the union's size. */
static size_t typed_merge(int kind, const hvds_sparse_layout_t* lay, const hvds_sstream_t* a,
                          const hvds_sstream_t* b, void* oi, void* ov) {
  const void *av = hvds__sstream_val(lay, a), *bv = hvds__sstream_val(lay, b);
  const void *ai = a->base, *bi = b->base;
  switch (kind) {
    case 1:
      return merge_i32_f32(ai, av, a->n, bi, bv, b->n, oi, ov);
    case 2:
      return merge_i64_f32(ai, av, a->n, bi, bv, b->n, oi, ov);
    case 3:
      return merge_i32_f64(ai, av, a->n, bi, bv, b->n, oi, ov);
    default:
      return merge_i64_f64(ai, av, a->n, bi, bv, b->n, oi, ov);
  }
}

/* A sparse result of at most na + nb entries without counting the union first: laid out for
 * na + nb, merged, then the values moved down to follow the union's indices. */
static hvds_result_t typed_merge_sparse(int kind, const hvds_sparse_layout_t* lay,
                                        const hvds_sstream_t* a, const hvds_sstream_t* b,
                                        hvds_sstream_t* out) {
  size_t most = a->n + b->n, vb = hvds__dtype_bytes(lay->dtype);
  if (hvds__sstream_alloc(lay, a->lo, a->len, most, 0, out) != HVDS_SUCCESS)
    return HVDS_SYSTEM_ERROR;
  char* wide = hvds__sstream_val(lay, out);
  size_t u = typed_merge(kind, lay, a, b, out->base, wide);
  out->n = u;
  memmove(hvds__sstream_val(lay, out), wide, u * vb);
  hvds__sstream_zero_padding(lay, out->base, u, 0);
  return HVDS_SUCCESS;
}

/* Two-pointer merge of sparse a and b. With oidx the union goes to (oidx, oval) entry by entry;
 * without, each row lands at oval + (index - lo) rows of a zero-filled dense range. */
static void two_pointer(const hvds_sparse_layout_t* lay, const hvds_sstream_t* a,
                        const hvds_sstream_t* b, char* oidx, char* oval, size_t lo) {
  size_t rb = hvds__sparse_row_bytes(lay), i = 0, j = 0, e = 0;
  const char *av = hvds__sstream_val(lay, a), *bv = hvds__sstream_val(lay, b);
  while (i < a->n || j < b->n) {
    int64_t x = i < a->n ? hvds__sparse_idx_get(lay, a->base, i) : INT64_MAX;
    int64_t y = j < b->n ? hvds__sparse_idx_get(lay, b->base, j) : INT64_MAX;
    int64_t k = x < y ? x : y;
    size_t at = oidx != NULL ? e++ : (size_t)k - lo;
    char* dst = oval + at * rb;
    if (oidx != NULL) hvds__sparse_idx_set(lay, oidx, at, k);
    if (x == k) {
      hvds__sparse_row_copy(dst, av + i++ * rb, rb);
      if (y == k) hvds__sparse_row_add(lay, dst, bv + j++ * rb);
    } else {
      hvds__sparse_row_copy(dst, bv + j++ * rb, rb);
    }
  }
}

/* At least one operand dense: copy the dense one, add the other. */
static hvds_result_t merge_dense(const hvds_sparse_layout_t* lay, const hvds_sstream_t* a,
                                 const hvds_sstream_t* b, hvds_sstream_t* out) {
  const hvds_sstream_t* d = a->dense ? a : b;
  const hvds_sstream_t* o = a->dense ? b : a;
  if (hvds__sstream_alloc(lay, d->lo, d->len, d->len, 1, out) != HVDS_SUCCESS)
    return HVDS_SYSTEM_ERROR;
  size_t rb = hvds__sparse_row_bytes(lay);
  char* ov = out->base;
  const char* sv = hvds__sstream_val(lay, o);
  memcpy(ov, d->base, d->len * rb);
  if (o->dense) {
    hvds__reduce(ov, sv, d->len * lay->row, lay->dtype, HVDS_SUM);
    return HVDS_SUCCESS;
  }
  for (size_t i = 0; i < o->n; i++)
    hvds__sparse_row_add(lay, ov + ((size_t)hvds__sparse_idx_get(lay, o->base, i) - d->lo) * rb,
                         sv + i * rb);
  return HVDS_SUCCESS;
}

hvds_result_t hvds__sstream_merge(const hvds_sparse_layout_t* lay, const hvds_sstream_t* a,
                                  const hvds_sstream_t* b, int ranged, hvds_sstream_t* out) {
  *out = (hvds_sstream_t){a->lo, a->len, 0, 0, NULL, NULL};
  if (a->dense || b->dense) return merge_dense(lay, a, b, out);
  int kind = typed_kind(lay);
  // The union is between max(|a|, |b|) and |a| + |b|: sparse even at the most, no count needed
  if (kind && a->n + b->n > 0 && !(ranged && hvds__sparse_dense_rule(lay, a->n + b->n, a->len)))
    return typed_merge_sparse(kind, lay, a, b, out);
  size_t u = kind ? typed_union(kind, a, b) : union_count(lay, a, b);
  int dense = ranged && hvds__sparse_dense_rule(lay, u, a->len);
  if (hvds__sstream_alloc(lay, a->lo, a->len, dense ? a->len : u, dense, out) != HVDS_SUCCESS)
    return HVDS_SYSTEM_ERROR;
  if (out->n == 0) return HVDS_SUCCESS;
  if (kind && !dense) {
    typed_merge(kind, lay, a, b, out->base, hvds__sstream_val(lay, out));
    return HVDS_SUCCESS;
  }
  char* ov = hvds__sstream_val(lay, out);
  if (dense) memset(ov, 0, a->len * hvds__sparse_row_bytes(lay));
  two_pointer(lay, a, b, dense ? NULL : out->base, ov, a->lo);
  return HVDS_SUCCESS;
}

hvds_result_t hvds__sstream_merge_many(const hvds_sparse_layout_t* lay, hvds_sstream_t* s, int m,
                                       int ranged, hvds_sstream_t* out) {
  *out = (hvds_sstream_t){m > 0 ? s[0].lo : 0, m > 0 ? s[0].len : 0, 0, 0, NULL, NULL};
  hvds_result_t rc = HVDS_SUCCESS;
  for (int step = 1; step < m && rc == HVDS_SUCCESS; step *= 2) {
    // One level of the tree: s[i] = s[i] + s[i + step] for i = 0, 2 step, 4 step, ...
    for (int i = 0; i + step < m && rc == HVDS_SUCCESS; i += 2 * step) {
      hvds_sstream_t t;
      rc = hvds__sstream_merge(lay, &s[i], &s[i + step], ranged, &t);
      if (rc != HVDS_SUCCESS) break;
      hvds__sstream_free(&s[i]);
      hvds__sstream_free(&s[i + step]);
      s[i] = t;
    }
  }
  if (rc == HVDS_SUCCESS && m > 0) {
    *out = s[0];
    s[0] = (hvds_sstream_t){out->lo, out->len, 0, 0, NULL, NULL};
  }
  for (int i = 0; i < m; i++) hvds__sstream_free(&s[i]);
  return rc;
}

/* Writes part [plo, plo + plen) of s, whose entries are e0..e1-1 (sparse s), to dst. */
static void write_part(const hvds_sparse_layout_t* lay, const hvds_sstream_t* s, size_t e0,
                       size_t e1, size_t plo, size_t plen, int dense, char* dst) {
  size_t rb = hvds__sparse_row_bytes(lay), isz = hvds__sparse_idx_bytes(lay), n = e1 - e0;
  const char* sv = hvds__sstream_val(lay, s);
  if (s->dense) {
    memcpy(dst, sv + (plo - s->lo) * rb, plen * rb);
  } else if (dense) {
    memset(dst, 0, plen * rb);
    for (size_t i = e0; i < e1; i++)
      hvds__sparse_row_copy(dst + ((size_t)hvds__sparse_idx_get(lay, s->base, i) - plo) * rb,
                            sv + i * rb, rb);
  } else if (n > 0) {
    memcpy(dst, s->base + e0 * isz, n * isz);
    memcpy(dst + hvds__pad8(n * isz), sv + e0 * rb, n * rb);
  }
  hvds__sstream_zero_padding(lay, dst, dense ? plen : n, dense);
}

hvds_result_t hvds__sstream_split(const hvds_sparse_layout_t* lay, const hvds_sstream_t* s, int m,
                                  char** buf, size_t* off, size_t* bytes, uint64_t* count) {
  size_t* edge = malloc(((size_t)m + 1) * sizeof(size_t));  // first entry of each part
  if (edge == NULL) return HVDS_SYSTEM_ERROR;
  size_t total = 0, e = 0;
  edge[0] = 0;
  for (int j = 0; j < m; j++) {
    size_t plo = hvds__sparse_part_lo(s->lo, s->len, m, j);
    size_t plen = hvds__sparse_part_lo(s->lo, s->len, m, j + 1) - plo;
    while (!s->dense && e < s->n && (size_t)hvds__sparse_idx_get(lay, s->base, e) < plo + plen) e++;
    edge[j + 1] = e;
    int dense = s->dense || hvds__sparse_dense_rule(lay, e - edge[j], plen);
    count[j] = dense ? plen : e - edge[j];
    bytes[j] = hvds__sstream_bytes(lay, count[j], dense);
    off[j] = total;
    total += bytes[j];
  }
  *buf = hvds__sparse_buf_alloc(total);
  if (*buf == NULL) {
    free(edge);
    return HVDS_SYSTEM_ERROR;
  }
  for (int j = 0; j < m; j++) {
    size_t plo = hvds__sparse_part_lo(s->lo, s->len, m, j);
    size_t plen = hvds__sparse_part_lo(s->lo, s->len, m, j + 1) - plo;
    int dense = plen > 0 && count[j] == plen;
    write_part(lay, s, edge[j], edge[j + 1], plo, plen, dense, *buf + off[j]);
  }
  free(edge);
  return HVDS_SUCCESS;
}

void hvds__sstream_add_into(const hvds_sparse_layout_t* lay, char* acc, const hvds_sstream_t* s) {
  size_t rb = hvds__sparse_row_bytes(lay);
  const char* sv = hvds__sstream_val(lay, s);
  if (s->dense) {
    hvds__reduce(acc, sv, s->len * lay->row, lay->dtype, HVDS_SUM);
    return;
  }
  for (size_t i = 0; i < s->n; i++)
    hvds__sparse_row_add(lay, acc + ((size_t)hvds__sparse_idx_get(lay, s->base, i) - s->lo) * rb,
                         sv + i * rb);
}
