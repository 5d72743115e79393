/* The sparse stream: the one in-memory and wire format of every sparse algorithm.
 *
 * Layout. A tensor is dim indices of row values each: COO is row = 1 (index = flat element),
 * row-sparse is row = D (index = row id, value = a D-wide row). An entry is (index, row).
 *
 * Stream. A stream covers the index range [lo, lo + len) and is either
 *   sparse: n entries, indices strictly ascending and inside the range, stored as
 *           [n indices of index_dtype, padded to 8 bytes][n rows, padded to 8 bytes], or
 *   dense:  all len rows, [len rows, padded to 8 bytes]; n == len.
 * The memory is one contiguous block, so a stream is sent as one message of
 * hvds__sstream_bytes() bytes, and the receiver rebuilds it from its count: a ranged stream is
 * dense exactly when n == len > 0 (SparCML's rule; the byte rule below turns every full sparse
 * stream dense, so the two never disagree). Streams used as hash partitions (ZEN) are unranged:
 * always sparse, with indices anywhere in [0, dim).
 *
 * The dense switch (SparCML's byte rule): a ranged stream of n entries is dense when
 *   n * (index bytes + row bytes) >= len * row bytes,
 * ties going dense. It is applied to every stream built here, per partition when partitioned.
 * Once dense a stream stays dense.
 *
 * Merges sum (hvds__reduce with HVDS_SUM); merge(a, b) and merge(b, a) give bitwise-identical
 * streams, so partners of an exchange hold the same result. Functions returning hvds_result_t
 * fail only with HVDS_SYSTEM_ERROR (out of memory) unless said otherwise; out is then empty.
 */
#ifndef HVDS_SPARSE_STREAM_H_
#define HVDS_SPARSE_STREAM_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hvdsparse.h"
#include "reduce.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The dense shape and the types of one sparse tensor; identical on every rank. */
typedef struct {
  size_t dim;               /* indices lie in [0, dim): elements (COO) or rows (row-sparse) */
  size_t row;               /* values per index: 1 for COO, D for row-sparse */
  hvds_dtype_t dtype;       /* value type: any dtype with a sum kernel (ops/reduce.h) */
  hvds_dtype_t index_dtype; /* HVDS_INT32 or HVDS_INT64 */
} hvds_sparse_layout_t;

/* HVDS_SUCCESS, or HVDS_INVALID_ARGUMENT with a message in err: unknown dtype, index type not
 * int32/int64, row 0, dim not addressable by the index type, dim * row bytes overflowing. */
hvds_result_t hvds__sparse_layout_check(const hvds_sparse_layout_t* lay, char* err, size_t errlen);
size_t hvds__sparse_idx_bytes(const hvds_sparse_layout_t* lay); /* 4 or 8 */
size_t hvds__sparse_row_bytes(const hvds_sparse_layout_t* lay); /* row * value bytes */
/* The byte rule: 1 when n entries over a range of len indices are cheaper (or equal) dense. */
int hvds__sparse_dense_rule(const hvds_sparse_layout_t* lay, size_t n, size_t len);
/* Start of part j of m equal parts of [lo, lo + len): lo + floor(j * len / m). */
size_t hvds__sparse_part_lo(size_t lo, size_t len, int m, int j);

typedef struct {
  size_t lo, len; /* index range covered (unranged streams: 0, dim) */
  size_t n;       /* entries; len when dense */
  int dense;      /* 1: all len rows, no indices */
  char* base;     /* payload (see above); NULL when empty */
  void* owned;    /* the allocation to free, or NULL for a view into someone else's memory */
} hvds_sstream_t;

static inline size_t hvds__pad8(size_t b) { return (b + 7) & ~(size_t)7; }

/* Wire bytes of a stream of n entries: dense ? pad8(n * row bytes) : pad8(n * index bytes) +
 * pad8(n * row bytes). */
size_t hvds__sstream_bytes(const hvds_sparse_layout_t* lay, size_t n, int dense);
/* Indices (sparse only) and rows of s. */
static inline char* hvds__sstream_idx(const hvds_sstream_t* s) { return s->base; }
char* hvds__sstream_val(const hvds_sparse_layout_t* lay, const hvds_sstream_t* s);
/* Index of entry i (lo + i when dense). */
int64_t hvds__sstream_index(const hvds_sparse_layout_t* lay, const hvds_sstream_t* s, size_t i);

/* How unevenly s's entries fall into m equal index ranges of [lo, lo + len): m times the largest
 * range's share of the entries, from 1 (even, and for an empty or dense s) to m (all in one).
 * The range-partitioned algorithms' busiest rank does that much more than the average. */
double hvds__sstream_range_imbalance(const hvds_sparse_layout_t* lay, const hvds_sstream_t* s,
                                     int m);

/* Allocates a stream of n entries over [lo, lo + len); contents undefined except the padding,
 * which is zeroed so no uninitialized byte goes on the wire. */
hvds_result_t hvds__sstream_alloc(const hvds_sparse_layout_t* lay, size_t lo, size_t len, size_t n,
                                  int dense, hvds_sstream_t* out /* OUT */);
/* Zeroes the padding bytes of a stream of n entries laid out at base. */
void hvds__sstream_zero_padding(const hvds_sparse_layout_t* lay, char* base, size_t n, int dense);
/* A view of received bytes at base (hvds__sstream_bytes() of them). Nothing is copied. */
void hvds__sstream_view(const hvds_sparse_layout_t* lay, char* base, size_t lo, size_t len,
                        size_t n, int dense, hvds_sstream_t* out /* OUT */);
/* Frees s's memory if it owns it and empties s. Accepts an empty stream. */
void hvds__sstream_free(hvds_sstream_t* s);
/* Makes s own its memory (copies a view). */
hvds_result_t hvds__sstream_own(const hvds_sparse_layout_t* lay, hvds_sstream_t* s);

/* out = a + b. ranged: a and b cover the same range, and out is dense by the byte rule on the
 * exact union size; unranged: both sparse, out sparse. */
hvds_result_t hvds__sstream_merge(const hvds_sparse_layout_t* lay, const hvds_sstream_t* a,
                                  const hvds_sstream_t* b, int ranged,
                                  hvds_sstream_t* out /* OUT */);
/* out = s[0] + ... + s[m-1], merged pairwise as a binary tree in index order (0+1, 2+3, then
 * (0+1)+(2+3), ...), so the summation order depends only on m. Consumes s: every s[i] is freed
 * and emptied, also on failure. m == 0 gives an empty sparse stream over [0, 0). */
hvds_result_t hvds__sstream_merge_many(const hvds_sparse_layout_t* lay, hvds_sstream_t* s, int m,
                                       int ranged, hvds_sstream_t* out /* OUT */);
/* Cuts ranged s into m parts (hvds__sparse_part_lo), each its own stream by the byte rule, packed
 * into one malloc'd buffer *buf: part j is count[j] entries at buf + off[j] (8-aligned), wire
 * size bytes[j]. Caller frees *buf. */
hvds_result_t hvds__sstream_split(const hvds_sparse_layout_t* lay, const hvds_sstream_t* s, int m,
                                  char** buf /* OUT */, size_t* off, size_t* bytes,
                                  uint64_t* count);
/* acc (len rows of the dense range [lo, lo + len) that ranged s covers) += s. */
void hvds__sstream_add_into(const hvds_sparse_layout_t* lay, char* acc, const hvds_sstream_t* s);
/* Writes s into dense (dim rows over [0, dim)): s's rows at their indices, zeros elsewhere. */
void hvds__sstream_to_dense(const hvds_sparse_layout_t* lay, const hvds_sstream_t* s, void* dense);
/* Rows of s with a bit set (-0.0 counts; an entry whose row is all zeros does not, such as a
 * sum that came out exactly zero, or the empty rows of a dense stream). */
size_t hvds__sstream_nonzero(const hvds_sparse_layout_t* lay, const hvds_sstream_t* s);
/* Rows with a bit set among n rows of rb bytes at rows. */
size_t hvds__sparse_nonzero_rows(const void* rows, size_t n, size_t rb);

/* Stable LSD radix sort of n (key, val) pairs by key, keys <= max_key. key and val are sorted in
 * place. Used for input normalization and ZEN's orderings. */
hvds_result_t hvds__sparse_sort_pairs(uint64_t* key, uint64_t* val, size_t n, uint64_t max_key);

/* Ranks n distinct keys <= max_key: rank[i] = how many of the keys are smaller than key[i], so
 * an entry can be written straight to its place in sorted order; on return key holds the keys
 * in increasing order. When the key range is small next to n, ranked in a bitmap of the range
 * (one pass to mark, one over the range's words, one to rank, one to list the marks), else by
 * the radix sort. */
hvds_result_t hvds__sparse_rank_unique(uint64_t* key, size_t n, uint64_t max_key, uint64_t* rank);

/* The sorted stream of n entries with distinct keys <= max_key given in any order: key i with
 * the i-th row of the segments (count[s] rows at rows[s], segment after segment). Writes the n
 * indices in increasing order at out_idx and each row at its key's rank at out_val. A bucket of
 * the key range at a time, so that the rows are written within a window the caches hold (one
 * rank array over the whole range wrote each row to a random place in memory). */
hvds_result_t hvds__sparse_sort_rows_unique(const hvds_sparse_layout_t* lay, const uint64_t* key,
                                            size_t n, uint64_t max_key, const char* const* rows,
                                            const size_t* count, int segs, char* out_idx,
                                            char* out_val);

/* 1 when hvds__sparse_sort_rows_unique sorts n entries over keys <= max_key by buckets (the
 * range has fewer buckets than entries); else it ranks the keys as hvds__sparse_rank_unique does
 * and writes each row at its rank. */
int hvds__sparse_sort_rows_bucketed(size_t n, uint64_t max_key);

/* Entry steps the radix sort takes, or with unique set the ranking's (the cost model's local
 * work; one step moves or counts one entry, a range word counts one). */
double hvds__sparse_sort_steps(double n, double max_key, int unique);

/* Set bits of a 64-bit word, branch-free (the builtin calls a library routine unless the
 * build targets a processor with the instruction). */
static inline uint64_t hvds__popcount64(uint64_t w) {
  w -= (w >> 1) & 0x5555555555555555ull;
  w = (w & 0x3333333333333333ull) + ((w >> 2) & 0x3333333333333333ull);
  w = (w + (w >> 4)) & 0x0f0f0f0f0f0f0f0full;
  return (w * 0x0101010101010101ull) >> 56;
}

/* dst row += src row (HVDS_SUM of lay->row values). Inline: COO rows of the common types are
 * single adds instead of a kernel-table call. */
static inline void hvds__sparse_row_add(const hvds_sparse_layout_t* lay, void* dst,
                                        const void* src) {
  if (lay->row == 1) {
    switch (lay->dtype) {
      case HVDS_FLOAT32:
        *(float*)dst += *(const float*)src;
        return;
      case HVDS_FLOAT64:
        *(double*)dst += *(const double*)src;
        return;
      case HVDS_INT32:
        *(int32_t*)dst = (int32_t)((uint32_t) * (int32_t*)dst + (uint32_t) * (const int32_t*)src);
        return;
      case HVDS_INT64:
        *(int64_t*)dst = (int64_t)((uint64_t) * (int64_t*)dst + (uint64_t) * (const int64_t*)src);
        return;
      default:
        break;
    }
  }
  hvds__reduce(dst, src, lay->row, lay->dtype, HVDS_SUM);
}
/* Copies one row of rb bytes; the common widths become single moves instead of memcpy calls. */
static inline void hvds__sparse_row_copy(void* dst, const void* src, size_t rb) {
  switch (rb) {
    case 2:
      memcpy(dst, src, 2);
      break;
    case 4:
      memcpy(dst, src, 4);
      break;
    case 8:
      memcpy(dst, src, 8);
      break;
    default:
      memcpy(dst, src, rb);
  }
}
/* 1 when the rb bytes at p are all zero. Inline: the sparse_detect scans call it per row. */
static inline int hvds__sparse_row_is_zero(const void* p, size_t rb) {
  const unsigned char* b = (const unsigned char*)p;
  size_t i = 0;
  for (; i + 8 <= rb; i += 8) {
    uint64_t w;
    memcpy(&w, b + i, 8);
    if (w != 0) return 0;
  }
  for (; i < rb; i++)
    if (b[i] != 0) return 0;
  return 1;
}
/* Reads and writes index i of an index array of lay's index type (inline: every merge loop
 * calls them per entry). */
static inline int64_t hvds__sparse_idx_get(const hvds_sparse_layout_t* lay, const void* idx,
                                           size_t i) {
  if (lay->index_dtype == HVDS_INT32) return ((const int32_t*)idx)[i];
  return ((const int64_t*)idx)[i];
}
static inline void hvds__sparse_idx_set(const hvds_sparse_layout_t* lay, void* idx, size_t i,
                                        int64_t v) {
  if (lay->index_dtype == HVDS_INT32)
    ((int32_t*)idx)[i] = (int32_t)v;
  else
    ((int64_t*)idx)[i] = v;
}

#ifdef __cplusplus
}
#endif
#endif /* HVDS_SPARSE_STREAM_H_ */
