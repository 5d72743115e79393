/* Orderings of sparse entries (sparse_stream.h): the radix sort of (key, value) pairs, the
 * ranking of distinct keys, and distinct-keyed rows put in key order, with the step counts the
 * cost model prices them by. Over ranges wider than the caches the ranking works a bucket of the
 * range at a time. */
#include <stdlib.h>
#include <string.h>

#include "sparse_stream.h"

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
 * list the n marks over the words again. The ranking by buckets also counts and moves each
 * entry once, which this leaves out (steps in the cache, where the marks were not). */
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

/* Ranking over a key range a bucket of it at a time: the entries are first moved to their
 * buckets (a stream per bucket), then each bucket is ranked in a bitmap of 2^15 keys that stays
 * in the L1 cache with its counts. One bitmap over the whole range read a cache line from memory
 * per key, which ranks that share a machine's caches pay most (ZEN's decode at 4 ranks on 2
 * cores: 30% of its time on that one load). */
#define RANK_BUCKET_BITS 15
#define RANK_BUCKET_WORDS ((size_t)1 << (RANK_BUCKET_BITS - 6))
#define RANK_BUCKET_MASK (((uint64_t)1 << RANK_BUCKET_BITS) - 1)

typedef struct {
  size_t nb;                          /* buckets */
  size_t* start;                      /* bucket b holds places [start[b], start[b + 1]) */
  size_t* cursor;                     /* while filling: each bucket's next free place */
  uint16_t* low;                      /* each place's key, its low bits */
  uint64_t bits[RANK_BUCKET_WORDS];   /* the marked bucket's keys */
  uint32_t before[RANK_BUCKET_WORDS]; /* marks in the words below each word */
} buckets_t;

static void buckets_free(buckets_t* B) {
  free(B->start);
  free(B->low);
}

/* Counts the n keys <= max_key per bucket; 0 when out of memory. */
static int buckets_init(buckets_t* B, const uint64_t* key, size_t n, uint64_t max_key) {
  B->nb = (size_t)(max_key >> RANK_BUCKET_BITS) + 1;
  B->start = calloc(2 * B->nb + 1, sizeof(size_t));
  B->low = malloc(n * sizeof(uint16_t));
  if (B->start == NULL || B->low == NULL) {
    buckets_free(B);
    return 0;
  }
  B->cursor = B->start + B->nb + 1;
  for (size_t i = 0; i < n; i++) B->start[(key[i] >> RANK_BUCKET_BITS) + 1]++;
  for (size_t b = 0; b < B->nb; b++) B->start[b + 1] += B->start[b];
  memcpy(B->cursor, B->start, B->nb * sizeof(size_t));
  return 1;
}

/* The next place in key k's bucket, its low bits recorded there. */
static inline size_t buckets_put(buckets_t* B, uint64_t k) {
  size_t at = B->cursor[k >> RANK_BUCKET_BITS]++;
  B->low[at] = (uint16_t)(k & RANK_BUCKET_MASK);
  return at;
}

/* Marks bucket b's keys and counts the marks before each word. */
static void buckets_mark(buckets_t* B, size_t b) {
  memset(B->bits, 0, sizeof B->bits);
  for (size_t t = B->start[b]; t < B->start[b + 1]; t++)
    B->bits[B->low[t] >> 6] |= 1ull << (B->low[t] & 63);
  uint32_t acc = 0;
  for (size_t w = 0; w < RANK_BUCKET_WORDS; w++) {
    B->before[w] = acc;
    acc += (uint32_t)hvds__popcount64(B->bits[w]);
  }
}

/* The rank of place t's key among its marked bucket's keys. */
static inline size_t buckets_rank(const buckets_t* B, size_t t) {
  uint64_t k = B->low[t];
  return B->before[k >> 6] + hvds__popcount64(B->bits[k >> 6] & ((1ull << (k & 63)) - 1));
}

/* The key of bucket b's mark at bit c of word w. */
static inline uint64_t buckets_key(size_t b, size_t w, uint64_t c) {
  return ((uint64_t)b << RANK_BUCKET_BITS) + (w << 6) + c;
}

static hvds_result_t rank_by_buckets(uint64_t* key, size_t n, uint64_t max_key, uint64_t* rank) {
  buckets_t B;
  size_t* pos = malloc(n * sizeof(size_t));  // each place's entry
  if (pos == NULL || !buckets_init(&B, key, n, max_key)) {
    free(pos);
    return HVDS_SYSTEM_ERROR;
  }
  for (size_t i = 0; i < n; i++) pos[buckets_put(&B, key[i])] = i;
  for (size_t b = 0; b < B.nb; b++) {
    size_t lo = B.start[b], hi = B.start[b + 1];
    if (lo == hi) continue;
    buckets_mark(&B, b);
    for (size_t t = lo; t < hi; t++) rank[pos[t]] = lo + buckets_rank(&B, t);
    for (size_t w = 0; w < RANK_BUCKET_WORDS; w++)  // the marks, in order: the sorted keys
      for (uint64_t v = B.bits[w]; v != 0; v &= v - 1)
        key[lo++] = buckets_key(b, w, (uint64_t)__builtin_ctzll(v));
  }
  buckets_free(&B);
  free(pos);
  return HVDS_SUCCESS;
}

/* hvds__sparse_sort_rows_unique over a range with more buckets than entries: the keys ranked
 * (by the radix sort where the range is that sparse), each row written at its rank. */
static hvds_result_t sort_rows_by_rank(const hvds_sparse_layout_t* lay, const uint64_t* key,
                                       size_t n, uint64_t max_key, const char* const* rows,
                                       const size_t* count, int segs, char* out_idx,
                                       char* out_val) {
  size_t rb = hvds__sparse_row_bytes(lay);
  uint64_t* sorted = malloc(2 * n * sizeof(uint64_t));
  if (sorted == NULL) return HVDS_SYSTEM_ERROR;
  uint64_t* rank = sorted + n;
  memcpy(sorted, key, n * sizeof(uint64_t));
  hvds_result_t rc = hvds__sparse_rank_unique(sorted, n, max_key, rank);
  for (size_t t = 0; rc == HVDS_SUCCESS && t < n; t++)
    hvds__sparse_idx_set(lay, out_idx, t, (int64_t)sorted[t]);
  size_t i = 0;
  for (int s = 0; rc == HVDS_SUCCESS && s < segs; s++)
    for (size_t t = 0; t < count[s]; t++, i++)
      hvds__sparse_row_copy(out_val + rank[i] * rb, rows[s] + t * rb, rb);
  free(sorted);
  return rc;
}

int hvds__sparse_sort_rows_bucketed(size_t n, uint64_t max_key) {
  return (max_key >> RANK_BUCKET_BITS) < n;  // fewer buckets than entries
}

hvds_result_t hvds__sparse_sort_rows_unique(const hvds_sparse_layout_t* lay, const uint64_t* key,
                                            size_t n, uint64_t max_key, const char* const* rows,
                                            const size_t* count, int segs, char* out_idx,
                                            char* out_val) {
  if (n == 0) return HVDS_SUCCESS;
  size_t rb = hvds__sparse_row_bytes(lay);
  if (!hvds__sparse_sort_rows_bucketed(n, max_key))
    return sort_rows_by_rank(lay, key, n, max_key, rows, count, segs, out_idx, out_val);
  buckets_t B;
  char* moved = malloc(n * rb);  // the rows in bucket order
  if (moved == NULL || !buckets_init(&B, key, n, max_key)) {
    free(moved);
    return HVDS_SYSTEM_ERROR;
  }
  size_t i = 0;
  for (int s = 0; s < segs; s++)
    for (size_t t = 0; t < count[s]; t++, i++)
      hvds__sparse_row_copy(moved + buckets_put(&B, key[i]) * rb, rows[s] + t * rb, rb);
  for (size_t b = 0; b < B.nb; b++) {
    size_t lo = B.start[b], hi = B.start[b + 1];
    if (lo == hi) continue;
    buckets_mark(&B, b);
    for (size_t t = lo; t < hi; t++)  // each row within the bucket's part of the output
      hvds__sparse_row_copy(out_val + (lo + buckets_rank(&B, t)) * rb, moved + t * rb, rb);
    for (size_t w = 0; w < RANK_BUCKET_WORDS; w++)
      for (uint64_t v = B.bits[w]; v != 0; v &= v - 1)
        hvds__sparse_idx_set(lay, out_idx, lo++,
                             (int64_t)buckets_key(b, w, (uint64_t)__builtin_ctzll(v)));
  }
  buckets_free(&B);
  free(moved);
  return HVDS_SUCCESS;
}

hvds_result_t hvds__sparse_rank_unique(uint64_t* key, size_t n, uint64_t max_key, uint64_t* rank) {
  if (n == 0) return HVDS_SUCCESS;
  if (rank_steps((double)n, (double)max_key) >= 2 * (double)n * radix_passes((double)max_key))
    return ranks_by_sort(key, n, max_key, rank);
  return rank_by_buckets(key, n, max_key, rank);
}
