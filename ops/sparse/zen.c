/* ZEN balanced parallelism (Wang et al., OSDI'25): hash-partitioned sparse reduce-scatter
 * (push), then a sparse allgather with hash bitmaps (pull).
 *
 * Algorithm: every rank hashes each of its indices with the keyed permutation of zen_hash.h
 * (key from rank 0) and owner j takes the hashed range j of P equal ranges, so skewed indices
 * spread evenly and the same index goes to the same owner on every rank.
 *   Partition: a counting sort by owner (histogram, prefix sum, stable scatter) packs P blocks,
 *     each in index order. Lossless: no hash table, no overflow area.
 *   Push: one size exchange (a count to each rank), then a pairwise all-to-all of the blocks.
 *   Aggregate: owner j merges its P blocks in a fixed tree order (hvds__sstream_merge_many).
 *   Pull: one small allgather of the owners' entry counts; then each owner sends its partition
 *     as COO (indices + values) or as a hash bitmap (one bit per hashed position in its range,
 *     plus the values in hashed order), whichever is smaller; every rank gathers all partitions
 *     (ring allgatherv) and decodes them into the result (sorted, or dense by the byte rule).
 * Steps: 2 (P - 1) for the push, 2 log2 P for the count allgather, P - 1 for the pull.
 * Cost: push (P - 1)/P k s beta; pull (P - 1)/P min(K s, N/8 + K row_bytes) beta: the pull's
 * index cost is bounded by one bit per index of the tensor, whatever P and the density.
 * Packed pull (c->packed: always with c->quant_bits 2, 4 or 8, SparCML section 4; at full
 * precision where the cost model says the link is slow enough): each owner packs its summed
 * partition once with its indices delta-coded or its bitmap as it is, and its values quantized or
 * as they are (sparse_quant.h); the packed sizes travel with the count allgather, the packed
 * partitions are gathered, and every rank, the owner included, unpacks them all before decoding.
 * The bitmap is then chosen against the delta-coded indices. The push's blocks go packed too,
 * their indices delta-coded and their values as they are (nothing is summed while quantized):
 * each block holds about k / P indices spread over the whole tensor, gaps of one or two bytes.
 * Imbalance (the debug log and the result): push = P * largest block / entries sent (per rank,
 * the worst reported), pull = P * largest partition / union size; 1.0 is perfect.
 * Preconditions: Sum/Average. Results are bitwise identical on every rank: each partition is
 * summed by one owner.
 *
 * Partitions for P = 3 (hashed ranges H0 H1 H2; * = summed over all ranks):
 *
 *   step      | rank 0    | rank 1    | rank 2
 *   ----------+-----------+-----------+----------
 *   partition | its H0 H1 H2 blocks on every rank
 *   push      | H0*       | H1*       | H2*
 *   pull      | H0*H1*H2* | H0*H1*H2* | H0*H1*H2*
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "quantize.h"
#include "sparse_internal.h"
#include "sparse_quant.h"
#include "zen_hash.h"

typedef struct {
  hvds_sparse_ctx_t* c;
  hvds_zen_hash_t h;
  int P, r;
  size_t *soff, *sbytes, *roff, *rbytes; /* push blocks */
  size_t *goff, *gbytes;                 /* pull blocks (goff has P + 1 entries) */
  size_t *qoff, *qbytes;                 /* packed pull blocks */
  uint64_t *scount, *rcount, *cursor;    /* entries per push block */
  uint64_t* gather;                      /* per rank: entries, push imbalance, packed bytes */
  hvds_sstream_t* parts;                 /* views of the received push blocks */
  hvds_sstream_t agg;                    /* this rank's partition, summed */
  char *sbuf, *rbuf, *gbuf;
  size_t pushed; /* bytes this rank pushed to the others (packed when c->packed) */
} zen_t;

static size_t range_lo(const zen_t* x, int j) {
  return hvds__sparse_part_lo(0, x->c->lay.dim, x->P, j);
}
static size_t range_len(const zen_t* x, int j) { return range_lo(x, j + 1) - range_lo(x, j); }
static uint64_t part_entries(const zen_t* x, int j) { return x->gather[3 * j]; }

/* Bytes of owner j's pull block as a bitmap and as COO; bitmap iff strictly smaller. */
static size_t bitmap_bytes(const zen_t* x, int j) {
  return hvds__pad8((range_len(x, j) + 7) / 8) +
         hvds__pad8(part_entries(x, j) * hvds__sparse_row_bytes(&x->c->lay));
}
static int use_bitmap(const zen_t* x, int j) {
  if (x->c->packed) {  // the rows cost the same; COO's head is delta-coded
    size_t n = part_entries(x, j), gap = n > 0 ? x->c->lay.dim / n : 0;
    return hvds__pad8((range_len(x, j) + 7) / 8) < n * hvds__sparse_varint_bytes(gap);
  }
  return bitmap_bytes(x, j) < hvds__sstream_bytes(&x->c->lay, part_entries(x, j), 0);
}

/* Bytes of owner j's pull block before its rows: its bitmap or its indices. */
static size_t head_bytes(const zen_t* x, int j) {
  return use_bitmap(x, j) ? (range_len(x, j) + 7) / 8
                          : part_entries(x, j) * hvds__sparse_idx_bytes(&x->c->lay);
}

/* Owner j's pull block as a packed block's shape. */
static hvds_qblock_shape_t pull_shape(const zen_t* x, int j) {
  return (hvds_qblock_shape_t){part_entries(x, j), head_bytes(x, j), !use_bitmap(x, j)};
}

/* Counting sort of the input's entries by owner into the push blocks. */
static hvds_result_t partition(zen_t* x, const hvds_sstream_t* in) {
  const hvds_sparse_layout_t* lay = &x->c->lay;
  size_t rb = hvds__sparse_row_bytes(lay), isz = hvds__sparse_idx_bytes(lay), total = 0;
  int* owner = malloc((in->n > 0 ? in->n : 1) * sizeof(int));
  if (owner == NULL) return HVDS_SYSTEM_ERROR;
  for (size_t i = 0; i < in->n; i++) {
    uint64_t y = hvds__zen_hash(&x->h, (uint64_t)hvds__sstream_index(lay, in, i));
    owner[i] = hvds__zen_owner(lay->dim, x->P, y);
    x->scount[owner[i]]++;
  }
  for (int j = 0; j < x->P; j++) {
    x->soff[j] = total;
    x->sbytes[j] = hvds__sstream_bytes(lay, x->scount[j], 0);
    total += x->sbytes[j];
  }
  x->sbuf = hvds__sparse_buf_alloc(total);
  if (x->sbuf == NULL) {
    free(owner);
    return HVDS_SYSTEM_ERROR;
  }
  const char* val = hvds__sstream_val(lay, in);
  for (size_t i = 0; i < in->n; i++) {
    int j = owner[i];
    size_t e = x->cursor[j]++;
    char* blk = x->sbuf + x->soff[j];
    hvds__sparse_idx_set(lay, blk, e, hvds__sstream_index(lay, in, i));
    hvds__sparse_row_copy(blk + hvds__pad8(x->scount[j] * isz) + e * rb, val + i * rb, rb);
  }
  for (int j = 0; j < x->P; j++)
    hvds__sstream_zero_padding(lay, x->sbuf + x->soff[j], x->scount[j], 0);
  free(owner);
  return HVDS_SUCCESS;
}

/* Push: size exchange, all-to-all of the blocks, and the sum of this rank's partition. */
static hvds_result_t push(zen_t* x, const hvds_sstream_t* in) {
  const hvds_sparse_layout_t* lay = &x->c->lay;
  if (partition(x, in) != HVDS_SUCCESS) return hvds__sparse_nomem(x->c, "zen");
  hvds_result_t rc =
      hvds__sparse_alltoall_streams(x->c, NULL, x->P, x->r, x->sbuf, x->soff, x->sbytes, x->scount,
                                    &x->rbuf, x->roff, x->rbytes, x->rcount, &x->pushed);
  if (rc != HVDS_SUCCESS) return rc;
  for (int j = 0; j < x->P; j++)
    hvds__sstream_view(lay, x->rbuf + x->roff[j], 0, lay->dim, x->rcount[j], 0, &x->parts[j]);
  if (hvds__sstream_merge_many(lay, x->parts, x->P, 0, &x->agg) != HVDS_SUCCESS)
    return hvds__sparse_nomem(x->c, "zen");
  return HVDS_SUCCESS;
}

/* Owner r's partition as a bitmap over its hashed range, then its rows in hashed order: each
 * row goes straight to its rank among the hashed positions. */
static hvds_result_t encode_bitmap(zen_t* x, char* dst) {
  const hvds_sparse_layout_t* lay = &x->c->lay;
  size_t rb = hvds__sparse_row_bytes(lay), n = x->agg.n, lo = range_lo(x, x->r);
  size_t mapb = hvds__pad8((range_len(x, x->r) + 7) / 8);
  uint64_t* key = malloc((n > 0 ? 2 * n : 1) * sizeof(uint64_t));
  if (key == NULL) return HVDS_SYSTEM_ERROR;
  uint64_t* rank = key + n;
  for (size_t i = 0; i < n; i++)
    key[i] = hvds__zen_hash(&x->h, (uint64_t)hvds__sstream_index(lay, &x->agg, i)) - lo;
  if (hvds__sparse_rank_unique(key, n, range_len(x, x->r) - 1, rank) != HVDS_SUCCESS) {
    free(key);
    return HVDS_SYSTEM_ERROR;
  }
  unsigned char* map = (unsigned char*)dst;
  memset(map, 0, mapb);
  for (size_t t = 0; t < n; t++) map[key[t] >> 3] |= (unsigned char)(1u << (key[t] & 7));
  const char* val = hvds__sstream_val(lay, &x->agg);  // LSB first, above; rows by rank
  for (size_t i = 0; i < n; i++) hvds__sparse_row_copy(dst + mapb + rank[i] * rb, val + i * rb, rb);
  memset(dst + mapb + n * rb, 0, hvds__pad8(n * rb) - n * rb);
  free(key);
  return HVDS_SUCCESS;
}

/* Writes this rank's pull block (its bitmap or indices, then its rows) at dst. */
static hvds_result_t own_block(zen_t* x, char* dst) {
  if (use_bitmap(x, x->r)) return encode_bitmap(x, dst);
  size_t bytes = hvds__sstream_bytes(&x->c->lay, x->agg.n, 0);
  if (bytes > 0) memcpy(dst, x->agg.base, bytes);
  return HVDS_SUCCESS;
}

/* Packed pull, before the size allgather: this rank's block packed into *mine (its packed
 * bytes in *packed); the block itself goes through buffer block. */
static hvds_result_t pack_own(zen_t* x, char** mine, size_t* packed) {
  const hvds_sparse_layout_t* lay = &x->c->lay;
  x->gather[3 * x->r] = x->agg.n;  // this rank's shape is known before the allgather
  hvds_qblock_shape_t me = pull_shape(x, x->r);
  size_t bytes = use_bitmap(x, x->r) ? bitmap_bytes(x, x->r) : 0;
  char* block = bytes > 0 ? hvds__sparse_buf_alloc(bytes) : NULL;
  *mine = hvds__sparse_buf_alloc(hvds__sparse_qblock_bound(lay, &me, x->c->quant_bits));
  hvds_result_t rc = *mine == NULL || (bytes > 0 && block == NULL) ? HVDS_SYSTEM_ERROR
                     : block != NULL                               ? own_block(x, block)
                                                                   : HVDS_SUCCESS;
  uint64_t seed = hvds__quant_seed(x->c->zen_seed, x->c->tag, (uint64_t)x->r);
  if (rc == HVDS_SUCCESS)
    rc = hvds__sparse_qblock_pack(lay, x->c->quant_bits, seed, block ? block : x->agg.base, &me,
                                  *mine, packed);
  hvds__sparse_buf_free(block);
  return rc == HVDS_SYSTEM_ERROR ? hvds__sparse_nomem(x->c, "zen") : rc;
}

/* The pull's allgather, packed: the packed blocks (sizes known from the count allgather), every
 * one (this rank's too) unpacked into gbuf at goff. */
static hvds_result_t gather_packed(zen_t* x, const char* mine) {
  const hvds_sparse_layout_t* lay = &x->c->lay;
  x->qoff[0] = 0;
  for (int j = 0; j < x->P; j++) {
    x->qbytes[j] = x->gather[3 * j + 2];
    x->qoff[j + 1] = x->qoff[j] + x->qbytes[j];
  }
  char* q = hvds__sparse_buf_alloc(x->qoff[x->P]);
  if (q == NULL) return hvds__sparse_nomem(x->c, "zen");
  memcpy(q + x->qoff[x->r], mine, x->qbytes[x->r]);
  hvds_result_t rc = hvds__allgatherv(x->c->p, q, x->qbytes, &x->c->coll);
  uint64_t nonzero = 0;
  for (int j = 0; j < x->P && rc == HVDS_SUCCESS; j++) {
    hvds_qblock_shape_t sj = pull_shape(x, j);
    rc = hvds__sparse_qblock_unpack(lay, x->c->quant_bits, q + x->qoff[j], x->qbytes[j], &sj,
                                    x->gbuf + x->goff[j], &nonzero);
    if (rc == HVDS_INTERNAL_ERROR)
      snprintf(x->c->p->error, sizeof x->c->p->error,
               "zen: the packed partition of rank %d does not decode", j);
  }
  if (rc == HVDS_SUCCESS) x->c->union_rows = (int64_t)nonzero;
  hvds__sparse_buf_free(q);
  return rc;
}

/* Pull, part 1: agree on the partitions' sizes and encodings, and gather them all. */
static hvds_result_t pull(zen_t* x, double push_imbalance) {
  uint64_t mine[3] = {x->agg.n, 0, 0};
  memcpy(&mine[1], &push_imbalance, sizeof(double));  // travels bit for bit (others add zero)
  char* packed = NULL;
  size_t packed_bytes = 0;
  hvds_result_t rc = x->c->packed ? pack_own(x, &packed, &packed_bytes) : HVDS_SUCCESS;
  mine[2] = packed_bytes;
  if (rc == HVDS_SUCCESS) rc = hvds__sparse_allgather_u64(x->c, mine, 3, x->gather);
  x->goff[0] = 0;
  for (int j = 0; j < x->P && rc == HVDS_SUCCESS; j++) {
    x->gbytes[j] = use_bitmap(x, j) ? bitmap_bytes(x, j)
                                    : hvds__sstream_bytes(&x->c->lay, part_entries(x, j), 0);
    x->goff[j + 1] = x->goff[j] + x->gbytes[j];
  }
  if (rc == HVDS_SUCCESS && (x->gbuf = hvds__sparse_buf_alloc(x->goff[x->P])) == NULL)
    rc = hvds__sparse_nomem(x->c, "zen");
  if (rc == HVDS_SUCCESS && packed != NULL) {
    rc = gather_packed(x, packed);
  } else if (rc == HVDS_SUCCESS) {
    rc = own_block(x, x->gbuf + x->goff[x->r]) == HVDS_SUCCESS ? HVDS_SUCCESS
                                                               : hvds__sparse_nomem(x->c, "zen");
    if (rc == HVDS_SUCCESS) rc = hvds__allgatherv(x->c->p, x->gbuf, x->gbytes, &x->c->coll);
  }
  hvds__sparse_buf_free(packed);
  return rc;
}

/* Offset in gbuf of owner j's rows (after its indices or its bitmap). */
static size_t rows_at(const zen_t* x, int j) { return x->goff[j] + hvds__pad8(head_bytes(x, j)); }

/* Lists every gathered entry's index, in gathered order (owner by owner). */
static void collect(const zen_t* x, uint64_t* key) {
  const hvds_sparse_layout_t* lay = &x->c->lay;
  size_t e = 0;
  for (int j = 0; j < x->P; j++) {
    const char* blk = x->gbuf + x->goff[j];
    size_t n = part_entries(x, j);
    if (!use_bitmap(x, j)) {
      for (size_t i = 0; i < n; i++) key[e++] = (uint64_t)hvds__sparse_idx_get(lay, blk, i);
      continue;
    }
    size_t bytes = (range_len(x, j) + 7) / 8, lo = range_lo(x, j);
    for (size_t b = 0; b < bytes; b++)
      for (unsigned v = (unsigned char)blk[b]; v != 0; v &= v - 1)
        key[e++] = hvds__zen_hash_inv(&x->h, lo + b * 8 + (size_t)__builtin_ctz(v));
  }
}

/* Pull, part 2, when every owner sent COO: each partition is a stream in index order, and the
 * partitions are disjoint, so their merge (a tree of sequential passes) is the result. */
static hvds_result_t decode_merge(zen_t* x, hvds_sstream_t* out) {
  const hvds_sparse_layout_t* lay = &x->c->lay;
  for (int j = 0; j < x->P; j++)
    hvds__sstream_view(lay, x->gbuf + x->goff[j], 0, lay->dim, part_entries(x, j), 0, &x->parts[j]);
  if (hvds__sstream_merge_many(lay, x->parts, x->P, 1, out) != HVDS_SUCCESS ||
      hvds__sstream_own(lay, out) != HVDS_SUCCESS)  // one partition: a view of gbuf until here
    return hvds__sparse_nomem(x->c, "zen");
  return HVDS_SUCCESS;
}

/* Pull, part 2: the result over [0, dim), dense by the byte rule, else sorted. With a bitmap
 * among the partitions (hashed order), every gathered entry's index is listed in gathered order;
 * a dense result takes each row at its index, a sparse one sorts the rows by index a bucket of
 * the range at a time (hvds__sparse_sort_rows_unique). */
static hvds_result_t decode(zen_t* x, hvds_sstream_t* out) {
  const hvds_sparse_layout_t* lay = &x->c->lay;
  size_t rb = hvds__sparse_row_bytes(lay), total = 0;
  int bitmaps = 0;
  for (int j = 0; j < x->P; j++) {
    total += part_entries(x, j);
    bitmaps += use_bitmap(x, j);
  }
  if (bitmaps == 0) return decode_merge(x, out);
  int dense = hvds__sparse_dense_rule(lay, total, lay->dim);
  uint64_t* key = malloc((total > 0 ? total : 1) * sizeof(uint64_t));
  const char** rows = malloc((size_t)x->P * sizeof(char*));
  size_t* count = malloc((size_t)x->P * sizeof(size_t));
  hvds_result_t rc =
      key == NULL || rows == NULL || count == NULL
          ? HVDS_SYSTEM_ERROR
          : hvds__sstream_alloc(lay, 0, lay->dim, dense ? lay->dim : total, dense, out);
  if (rc == HVDS_SUCCESS) {
    collect(x, key);
    for (int j = 0; j < x->P; j++) rows[j] = x->gbuf + rows_at(x, j), count[j] = part_entries(x, j);
    char* ov = hvds__sstream_val(lay, out);
    if (dense) {
      memset(ov, 0, lay->dim * rb);
      size_t e = 0;
      for (int j = 0; j < x->P; j++)
        for (size_t t = 0; t < count[j]; t++, e++)
          hvds__sparse_row_copy(ov + key[e] * rb, rows[j] + t * rb, rb);
    } else {
      rc = hvds__sparse_sort_rows_unique(lay, key, total, lay->dim - 1, rows, count, x->P,
                                         out->base, ov);
    }
  }
  free(key);
  free(rows);
  free(count);
  if (rc == HVDS_SUCCESS) return HVDS_SUCCESS;
  hvds__sstream_free(out);
  return hvds__sparse_nomem(x->c, "zen");
}

/* Logs and records this call's imbalance figures. */
static void report(zen_t* x, double push_imbalance) {
  double worst = 0, total = 0, largest = 0;
  for (int j = 0; j < x->P; j++) {
    double b;
    memcpy(&b, &x->gather[3 * j + 1], sizeof b);
    if (b > worst) worst = b;
    total += (double)part_entries(x, j);
    if ((double)part_entries(x, j) > largest) largest = (double)part_entries(x, j);
  }
  x->c->res->push_imbalance = worst;
  x->c->res->pull_imbalance = total > 0 ? x->P * largest / total : 1.0;
  HVDS_DEBUG(
      "zen: rank %d of %d: push imbalance %.3f here, %.3f worst; owns %llu of %.0f "
      "entries (pull imbalance %.3f); pushed %zu bytes%s, pulls its block as %llu bytes%s",
      x->r, x->P, push_imbalance, worst, (unsigned long long)x->agg.n, total,
      x->c->res->pull_imbalance, x->pushed, x->c->packed ? " packed" : "",
      (unsigned long long)(x->c->packed ? x->gather[3 * x->r + 2] : x->gbytes[x->r]),
      x->c->packed ? " packed" : "");
}

static int zen_init(zen_t* x, hvds_sparse_ctx_t* c) {
  size_t P = (size_t)c->p->size;
  *x = (zen_t){.c = c, .P = c->p->size, .r = c->p->rank};
  hvds__zen_hash_init(&x->h, c->lay.dim, c->zen_seed);
  x->soff = calloc(8 * P + 2, sizeof(size_t));
  x->scount = calloc(6 * P, sizeof(uint64_t));
  x->parts = calloc(P, sizeof(hvds_sstream_t));
  if (x->soff == NULL || x->scount == NULL || x->parts == NULL) return 0;
  x->sbytes = x->soff + P, x->roff = x->soff + 2 * P, x->rbytes = x->soff + 3 * P;
  x->gbytes = x->soff + 4 * P, x->goff = x->soff + 5 * P;
  x->qbytes = x->soff + 6 * P + 1, x->qoff = x->soff + 7 * P + 1;
  x->rcount = x->scount + P, x->cursor = x->scount + 2 * P, x->gather = x->scount + 3 * P;
  return 1;
}

hvds_result_t hvds__sparse_run_zen(hvds_sparse_ctx_t* c, hvds_sstream_t* in, hvds_sstream_t* out) {
  *out = (hvds_sstream_t){0, c->lay.dim, 0, 0, NULL, NULL};
  if (c->lay.dim == 0) return HVDS_SUCCESS;  // nothing to move on any rank
  zen_t x;
  hvds_result_t rc = zen_init(&x, c) ? HVDS_SUCCESS : hvds__sparse_nomem(c, "zen");
  if (rc == HVDS_SUCCESS) rc = push(&x, in);
  uint64_t sent = 0, largest = 0;
  for (int j = 0; rc == HVDS_SUCCESS && j < x.P; j++) {
    sent += x.scount[j];
    if (x.scount[j] > largest) largest = x.scount[j];
  }
  double push_imbalance = sent > 0 ? (double)x.P * (double)largest / (double)sent : 1.0;
  if (rc == HVDS_SUCCESS) rc = pull(&x, push_imbalance);
  if (rc == HVDS_SUCCESS) rc = decode(&x, out);
  if (rc == HVDS_SUCCESS) report(&x, push_imbalance);
  hvds__sstream_free(&x.agg);
  free(x.soff);
  free(x.scount);
  free(x.parts);
  hvds__sparse_buf_free(x.sbuf);
  hvds__sparse_buf_free(x.rbuf);
  hvds__sparse_buf_free(x.gbuf);
  return rc;
}
