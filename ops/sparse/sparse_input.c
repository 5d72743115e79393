/* The caller's entries (sparse_input.h): validation, counting, and ordering into a stream (sort,
 * sum duplicates, dense switch), now or when an algorithm asks for it. */
#include "sparse_input.h"

#include <stdlib.h>
#include <string.h>

#include "sparse_pool.h"

/* Bits of keys up to max_key. */
static int key_bits(uint64_t max_key) {
  int b = 0;
  while (b < 64 && (max_key >> b) != 0) b++;
  return b;
}

/* Passes of the packed sort: digits of at most 12 bits (a 32 KiB histogram). */
#define PACKED_DIGIT_MAX 12
static int packed_passes(int bits) { return (bits + PACKED_DIGIT_MAX - 1) / PACKED_DIGIT_MAX; }

double hvds__sparse_input_steps(double n, double max_key, double rb, int sorted) {
  double rows = n * rb / 16;  // a step per 16 bytes of values copied or summed
  int passes = packed_passes(key_bits((uint64_t)max_key));  // sort_and_sum's
  return sorted ? n + rows : 4 * n + 2 * n * passes + rows;
}

/* ---- Checking ---- */

/* Checks every index against [0, dim). Returns 1 if strictly ascending, 0 if not, -1 on a bad
 * index (recorded in chk). */
static int scan_indices(const hvds_sparse_layout_t* lay, const void* indices, size_t nnz,
                        hvds_sparse_input_check_t* chk) {
  int sorted = 1;
  int64_t prev = -1;
  for (size_t i = 0; i < nnz; i++) {
    int64_t x = hvds__sparse_idx_get(lay, indices, i);
    if (x < 0 || (uint64_t)x >= (uint64_t)lay->dim) {
      *chk = (hvds_sparse_input_check_t){HVDS_SPARSE_INPUT_BAD_INDEX, x, i, 0};
      return -1;
    }
    if (x <= prev) sorted = 0;
    prev = x;
  }
  return sorted;
}

/* ---- Ordering ---- */

/* Sorted unique input: copy it, sparse or dense. */
static hvds_result_t copy_sorted(const hvds_sparse_layout_t* lay, const void* indices,
                                 const char* values, size_t nnz, hvds_sstream_t* out) {
  size_t rb = hvds__sparse_row_bytes(lay);
  int dense = hvds__sparse_dense_rule(lay, nnz, lay->dim);
  size_t n = dense ? lay->dim : nnz;
  if (hvds__sstream_alloc(lay, 0, lay->dim, n, dense, out) != HVDS_SUCCESS)
    return HVDS_SYSTEM_ERROR;
  char* val = hvds__sstream_val(lay, out);
  if (!dense) {
    memcpy(out->base, indices, nnz * hvds__sparse_idx_bytes(lay));
    memcpy(val, values, nnz * rb);
    return HVDS_SUCCESS;
  }
  memset(val, 0, n * rb);
  for (size_t i = 0; i < nnz; i++)
    hvds__sparse_row_copy(val + (size_t)hvds__sparse_idx_get(lay, indices, i) * rb, values + i * rb,
                          rb);
  return HVDS_SUCCESS;
}

/* Stable LSD radix sort of n words by their bits [32, 32 + bits), bits <= 32: an index above a
 * 32-bit position, so one 8-byte word moves per entry and equal indices keep input order. tmp
 * holds n words; the sorted words end in a. Its histogram lives on the stack: it cannot fail. */
static void sort_packed(uint64_t* a, uint64_t* tmp, size_t n, int bits) {
  int passes = packed_passes(bits);
  if (passes == 0) return;
  int digit = (bits + passes - 1) / passes;
  size_t count[(size_t)1 << PACKED_DIGIT_MAX];
  uint64_t mask = ((uint64_t)1 << digit) - 1, *src = a, *dst = tmp;
  for (int p = 0; p < passes; p++) {
    int shift = 32 + p * digit;
    memset(count, 0, ((size_t)1 << digit) * sizeof(size_t));
    for (size_t i = 0; i < n; i++) count[(src[i] >> shift) & mask]++;
    size_t at = 0;
    for (size_t d = 0; d <= mask; d++) {
      size_t c = count[d];
      count[d] = at;
      at += c;
    }
    for (size_t i = 0; i < n; i++) dst[count[(src[i] >> shift) & mask]++] = src[i];
    uint64_t* t = src;
    src = dst;
    dst = t;
  }
  if (src != a) memcpy(a, src, n * sizeof(uint64_t));
}

/* Whether index << 32 | position packs every entry into one word. */
static int packable(const hvds_sparse_layout_t* lay, size_t nnz) {
  return nnz <= UINT32_MAX && lay->dim <= (size_t)UINT32_MAX + 1;
}

/* Sorts the entries by index, stably: key[0, nnz) gets the indices in order and key[nnz, 2 nnz)
 * their positions in the caller's arrays. Fails (out of memory) only when not packable. */
static hvds_result_t sort_entries(const hvds_sparse_layout_t* lay, const void* indices, size_t nnz,
                                  uint64_t* key) {
  uint64_t* pos = key + nnz;
  if (!packable(lay, nnz)) {
    for (size_t i = 0; i < nnz; i++) {
      key[i] = (uint64_t)hvds__sparse_idx_get(lay, indices, i);
      pos[i] = i;
    }
    return hvds__sparse_sort_pairs(key, pos, nnz, lay->dim - 1);
  }
  for (size_t i = 0; i < nnz; i++)
    key[i] = (uint64_t)hvds__sparse_idx_get(lay, indices, i) << 32 | (uint64_t)i;
  sort_packed(key, pos, nnz, key_bits(lay->dim - 1));
  for (size_t i = 0; i < nnz; i++) {  // unpack in place: key = index, pos = position
    pos[i] = key[i] & UINT32_MAX;
    key[i] >>= 32;
  }
  return HVDS_SUCCESS;
}

/* Distinct indices among the sorted ones. */
static size_t count_runs(const uint64_t* key, size_t nnz) {
  size_t u = 0;
  for (size_t i = 0; i < nnz; i++) u += i == 0 || key[i] != key[i - 1];
  return u;
}

/* The stream for u distinct indices over [0, dim), dense by the byte rule. */
static hvds_result_t alloc_ordered(const hvds_sparse_layout_t* lay, size_t u, hvds_sstream_t* out) {
  int dense = hvds__sparse_dense_rule(lay, u, lay->dim);
  return hvds__sstream_alloc(lay, 0, lay->dim, dense ? lay->dim : u, dense, out);
}

/* Sums each run of equal indices of the sorted entries into out (alloc_ordered's), in input
 * order: the first row copied, the next ones added. */
static void sum_runs(const hvds_sparse_layout_t* lay, const uint64_t* key, const char* values,
                     size_t nnz, hvds_sstream_t* out) {
  size_t rb = hvds__sparse_row_bytes(lay);
  const uint64_t* pos = key + nnz;
  char* val = hvds__sstream_val(lay, out);
  if (out->dense) memset(val, 0, lay->dim * rb);
  size_t e = 0;  // output entry of the current run
  for (size_t i = 0; i < nnz; i++) {
    int first = i == 0 || key[i] != key[i - 1];
    if (first && i > 0) e++;
    size_t at = out->dense ? key[i] : e;
    if (first && !out->dense) hvds__sparse_idx_set(lay, out->base, e, (int64_t)key[i]);
    if (first)
      hvds__sparse_row_copy(val + at * rb, values + pos[i] * rb, rb);
    else
      hvds__sparse_row_add(lay, val + at * rb, values + pos[i] * rb);
  }
}

/* Unsorted or duplicated input, ordered now. */
static hvds_result_t sort_and_sum(const hvds_sparse_layout_t* lay, const void* indices,
                                  const char* values, size_t nnz, hvds_sstream_t* out) {
  uint64_t* key = hvds__sparse_buf_alloc(2 * nnz * sizeof(uint64_t));
  if (key == NULL) return HVDS_SYSTEM_ERROR;
  hvds_result_t rc = sort_entries(lay, indices, nnz, key);
  if (rc == HVDS_SUCCESS) rc = alloc_ordered(lay, count_runs(key, nnz), out);
  if (rc == HVDS_SUCCESS) sum_runs(lay, key, values, nnz, out);
  hvds__sparse_buf_free(key);
  return rc == HVDS_SUCCESS ? HVDS_SUCCESS : HVDS_SYSTEM_ERROR;
}

/* ---- Counting without ordering ---- */

/* An input with fewer entries than one per DEFER_SPARSEST indices is ordered at once: the dense
 * allreduce is not chosen that sparse, and marking its entries would only add to the work of the
 * algorithm that is (about a tenth of a sort). The marks then take at most 2 bytes an entry. */
#define DEFER_SPARSEST 16

/* Set bits of the bitmap w in [lo, hi). */
static size_t bits_in(const uint64_t* w, size_t lo, size_t hi) {
  size_t c = 0;
  for (; lo < hi && (lo & 63); lo++) c += (w[lo >> 6] >> (lo & 63)) & 1;
  for (; lo + 64 <= hi; lo += 64) c += hvds__popcount64(w[lo >> 6]);
  for (; lo < hi; lo++) c += (w[lo >> 6] >> (lo & 63)) & 1;
  return c;
}

static void release_deferred(hvds_sparse_input_t* in) {
  hvds__sparse_buf_free(in->keys);
  hvds__sparse_buf_free(in->marks);
  in->keys = in->marks = NULL;
  in->deferred = 0;
}

/* Marks the indices present, counts them per range, and allocates all the ordering will need. */
static hvds_result_t defer(hvds_sparse_input_t* in, int ranges) {
  const hvds_sparse_layout_t* lay = &in->lay;
  size_t words = lay->dim / 64 + 1, nnz = in->nnz;
  in->marks = hvds__sparse_buf_alloc(words * sizeof(uint64_t));
  in->keys = hvds__sparse_buf_alloc(2 * nnz * sizeof(uint64_t));
  if (in->marks == NULL || in->keys == NULL) {
    release_deferred(in);
    in->chk.status = HVDS_SPARSE_INPUT_NOMEM;
    return HVDS_SYSTEM_ERROR;
  }
  memset(in->marks, 0, words * sizeof(uint64_t));
  for (size_t i = 0; i < nnz; i++) {
    uint64_t x = (uint64_t)hvds__sparse_idx_get(lay, in->indices, i);
    in->marks[x >> 6] |= 1ull << (x & 63);
  }
  int m = ranges > 1 ? ranges : 1;
  size_t distinct = 0, largest = 0;
  for (int j = 0; j < m; j++) {
    size_t c = bits_in(in->marks, hvds__sparse_part_lo(0, lay->dim, m, j),
                       hvds__sparse_part_lo(0, lay->dim, m, j + 1));
    distinct += c;
    if (c > largest) largest = c;
  }
  if (alloc_ordered(lay, distinct, &in->stream) != HVDS_SUCCESS) {
    release_deferred(in);
    in->chk.status = HVDS_SPARSE_INPUT_NOMEM;
    return HVDS_SYSTEM_ERROR;
  }
  in->deferred = 1;
  in->entries = in->stream.n;
  if (m > 1 && !in->stream.dense) in->imbalance = (double)m * (double)largest / (double)distinct;
  // The marking pass is paid whatever runs; the dense baseline then adds the rows in as they come.
  double marking = (double)nnz + (double)words;
  in->chk.steps += marking;
  in->scatter_steps =
      hvds__sparse_input_steps((double)nnz, 0, (double)hvds__sparse_row_bytes(lay), 1) + marking;
  return HVDS_SUCCESS;
}

/* ---- The input ---- */

hvds_result_t hvds__sparse_input_take(const hvds_sparse_layout_t* lay, const void* indices,
                                      const void* values, size_t nnz, int ranges, int may_defer,
                                      hvds_sparse_input_t* in) {
  *in = (hvds_sparse_input_t){.lay = *lay,
                              .indices = indices,
                              .values = values,
                              .nnz = nnz,
                              .chk = {HVDS_SPARSE_INPUT_OK, 0, 0, 0},
                              .imbalance = 1.0,
                              .stream = {0, lay->dim, 0, 0, NULL, NULL}};
  if (nnz == 0) return HVDS_SUCCESS;
  if (indices == NULL || values == NULL) {
    in->chk.status = HVDS_SPARSE_INPUT_NULL;
    return HVDS_INVALID_ARGUMENT;
  }
  int sorted = scan_indices(lay, indices, nnz, &in->chk);
  if (sorted < 0) return HVDS_INVALID_ARGUMENT;
  in->chk.steps = hvds__sparse_input_steps((double)nnz, (double)(lay->dim > 0 ? lay->dim - 1 : 0),
                                           (double)hvds__sparse_row_bytes(lay), sorted);
  if (!sorted && may_defer && lay->dim / DEFER_SPARSEST < nnz && packable(lay, nnz))
    return defer(in, ranges);
  hvds_result_t rc = sorted ? copy_sorted(lay, indices, values, nnz, &in->stream)
                            : sort_and_sum(lay, indices, values, nnz, &in->stream);
  if (rc != HVDS_SUCCESS) {
    in->chk.status = HVDS_SPARSE_INPUT_NOMEM;
    return rc;
  }
  in->entries = in->stream.n;
  in->imbalance = hvds__sstream_range_imbalance(lay, &in->stream, ranges);
  in->scatter_steps = in->chk.steps;
  return HVDS_SUCCESS;
}

void hvds__sparse_input_order(hvds_sparse_input_t* in) {
  if (!in->deferred) return;
  (void)sort_entries(&in->lay, in->indices, in->nnz, in->keys);  // packable: cannot fail
  sum_runs(&in->lay, in->keys, in->values, in->nnz, &in->stream);
  release_deferred(in);
}

/* Writes the entries into the zeroed dense tensor d: an index's first row copied (its mark then
 * cleared), the next ones added. Everything it reads per entry is a local or a parameter: a
 * store through d (char) may alias anything in memory, so fields read through `in` would be
 * loaded again at every entry. */
static void scatter(hvds_sparse_layout_t lay, const void* indices, const char* values, size_t n,
                    uint64_t* marks, char* d) {
  size_t rb = hvds__sparse_row_bytes(&lay);
  for (size_t i = 0; i < n; i++) {
    uint64_t x = (uint64_t)hvds__sparse_idx_get(&lay, indices, i), bit = 1ull << (x & 63);
    if (marks[x >> 6] & bit) {
      hvds__sparse_row_copy(d + x * rb, values + i * rb, rb);
      marks[x >> 6] &= ~bit;
    } else {
      hvds__sparse_row_add(&lay, d + x * rb, values + i * rb);
    }
  }
}

/* The same for the common case, one float32 value per index, with the index type a local: about
 * a third faster than the general loop at 2^20 rows, 50% (one thread). */
static void scatter_f32(const void* indices, int wide, const char* values, size_t n,
                        uint64_t* marks, char* d) {
  for (size_t i = 0; i < n; i++) {
    uint64_t x = wide ? (uint64_t)((const int64_t*)indices)[i]
                      : (uint64_t)(uint32_t)((const int32_t*)indices)[i];
    uint64_t bit = 1ull << (x & 63), w = marks[x >> 6];
    float v, sum;
    memcpy(&v, values + i * sizeof v, sizeof v);
    if (w & bit) {
      marks[x >> 6] = w & ~bit;
      sum = v;
    } else {
      memcpy(&sum, d + x * sizeof sum, sizeof sum);
      sum += v;
    }
    memcpy(d + x * sizeof sum, &sum, sizeof sum);
  }
}

void hvds__sparse_input_to_dense(hvds_sparse_input_t* in, void* dense) {
  const hvds_sparse_layout_t* lay = &in->lay;
  if (!in->deferred) {
    hvds__sstream_to_dense(lay, &in->stream, dense);
    return;
  }
  memset(dense, 0, lay->dim * hvds__sparse_row_bytes(lay));
  // At random, but the misses overlap: faster than a pass that first groups the entries by block.
  if (lay->row == 1 && lay->dtype == HVDS_FLOAT32)
    scatter_f32(in->indices, lay->index_dtype == HVDS_INT64, in->values, in->nnz, in->marks, dense);
  else
    scatter(*lay, in->indices, in->values, in->nnz, in->marks, dense);
  release_deferred(in);
  hvds__sstream_free(&in->stream);
}

void hvds__sparse_input_free(hvds_sparse_input_t* in) {
  release_deferred(in);
  hvds__sstream_free(&in->stream);
}

hvds_result_t hvds__sstream_from_input(const hvds_sparse_layout_t* lay, const void* indices,
                                       const void* values, size_t nnz,
                                       hvds_sparse_input_check_t* chk, hvds_sstream_t* out) {
  hvds_sparse_input_t in;
  hvds_result_t rc = hvds__sparse_input_take(lay, indices, values, nnz, 1, 0, &in);
  *chk = in.chk;
  *out = in.stream;
  return rc;
}
