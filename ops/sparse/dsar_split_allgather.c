/* DSAR_Split_allgather (SparCML, dynamic sparse allreduce: sparse reduce-scatter, then a dense
 * allgather).
 *
 * Algorithm: cut [0, N) into P equal ranges; rank j owns range j. Any P, no fold.
 *   Split: every rank cuts its stream into P parts (sparse or dense by the byte rule on each
 *     range), exchanges the entry counts, then sends part j to rank j (pairwise all-to-all).
 *   Reduce: the owner adds the P parts into a dense accumulator of its range, in rank order (not
 *     arrival order, so the sums are the same from run to run).
 *   Allgather: the dense ranges, straight into the result (ring allgatherv).
 * Steps: 2 (P - 1) for the split, P - 1 for the allgather.
 * Cost: 3 (P - 1) alpha + (P - 1)/P (k s + N row_bytes) beta. The result is always dense, so the
 * gain over a dense allreduce is at most 2x: for results that fill in.
 * Quantized allgather (c->quant_bits 2, 4 or 8; SparCML section 4): the ranges are reduced in
 * full precision, then each owner encodes its range once (ops/quantize.h, seed from the shared
 * key, the tag and the range) after an 8-byte count of its non-zero rows, the allgather moves
 * the encoded bytes, and every rank, the owner included, decodes every range into the result. Never
 * summed while quantized; the N row_bytes term shrinks to about N row (bits / 8 + 4 / 1024) bytes.
 * Preconditions: Sum/Average. Results are bitwise identical on every rank.
 *
 * Ranges held for P = 3 (ranges A B C; * = reduced over all ranks):
 *
 *   step        | rank 0 | rank 1 | rank 2
 *   ------------+--------+--------+-------
 *   split+add   | A*     | B*     | C*
 *   allgather 1 | A* C*  | A* B*  | B* C*
 *   allgather 2 | A*B*C* | A*B*C* | A*B*C*
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "quantize.h"
#include "sparse_internal.h"

typedef struct {
  size_t *soff, *sbytes, *roff, *rbytes;
  uint64_t *scount, *rcount;
  char *sbuf, *rbuf;
} dsar_t;

/* Start and length of rank j's range. */
static size_t range_lo(size_t dim, int P, int j) { return hvds__sparse_part_lo(0, dim, P, j); }
static size_t range_len(size_t dim, int P, int j) {
  return range_lo(dim, P, j + 1) - range_lo(dim, P, j);
}

/* The exchange: the P parts of this rank's range land in x->rbuf. */
static hvds_result_t exchange(hvds_sparse_ctx_t* c, const hvds_sstream_t* in, dsar_t* x) {
  const hvds_sparse_layout_t* lay = &c->lay;
  int P = c->p->size, r = c->p->rank;
  if (hvds__sstream_split(lay, in, P, &x->sbuf, x->soff, x->sbytes, x->scount) != HVDS_SUCCESS)
    return hvds__sparse_nomem(c, "dsar_split_allgather");
  HVDS_CHECK(hvds__sparse_alltoall_u64(c, NULL, P, r, x->scount, x->rcount));
  size_t len = range_len(lay->dim, P, r), total = 0;
  for (int j = 0; j < P; j++) {
    x->roff[j] = total;
    x->rbytes[j] = hvds__sstream_bytes(lay, x->rcount[j], x->rcount[j] == len && len > 0);
    total += x->rbytes[j];
  }
  x->rbuf = malloc(total > 0 ? total : 1);
  if (x->rbuf == NULL) return hvds__sparse_nomem(c, "dsar_split_allgather");
  return hvds__sparse_alltoallv(c, NULL, P, r, x->sbuf, x->soff, x->sbytes, x->rbuf, x->roff,
                                x->rbytes);
}

/* The allgather of the reduced ranges, quantized: this rank encodes its range of out into its
 * block of a buffer of encoded ranges, after a count of the range's non-zero rows before
 * quantization (for the union size the runtime learns from), the blocks are gathered, and every
 * block is decoded into its range of out (this rank's too, so every rank holds the same
 * values). */
static hvds_result_t gather_quantized(hvds_sparse_ctx_t* c, dsar_t* x, hvds_sstream_t* out) {
  const hvds_sparse_layout_t* lay = &c->lay;
  int P = c->p->size, r = c->p->rank, bits = c->quant_bits;
  size_t rb = hvds__sparse_row_bytes(lay), total = 0;
  for (int j = 0; j < P; j++) {
    x->roff[j] = total;  // roff/sbytes are free after the reduce: encoded offsets and sizes
    x->sbytes[j] = sizeof(uint64_t) + hvds__quant_bytes(range_len(lay->dim, P, j) * lay->row, bits);
    total += x->sbytes[j];
  }
  char* q = malloc(total > 0 ? total : 1);
  if (q == NULL) return hvds__sparse_nomem(c, "dsar_split_allgather");
  size_t lo = range_lo(lay->dim, P, r), len = range_len(lay->dim, P, r);
  uint64_t nonzero = hvds__sparse_nonzero_rows(out->base + lo * rb, len, rb);
  memcpy(q + x->roff[r], &nonzero, sizeof nonzero);
  uint64_t seed = hvds__quant_seed(c->zen_seed, c->tag, (uint64_t)r);
  hvds_result_t rc = hvds__quant_encode(out->base + lo * rb, len * lay->row, lay->dtype, bits, seed,
                                        q + x->roff[r] + sizeof nonzero);
  if (rc == HVDS_SUCCESS) rc = hvds__allgatherv(c->p, q, x->sbytes, &c->coll);
  uint64_t rows = 0;
  for (int j = 0; j < P && rc == HVDS_SUCCESS; j++) {
    memcpy(&nonzero, q + x->roff[j], sizeof nonzero);
    rows += nonzero;
    size_t at = range_lo(lay->dim, P, j) * rb;
    rc = hvds__quant_decode(q + x->roff[j] + sizeof nonzero, range_len(lay->dim, P, j) * lay->row,
                            bits, lay->dtype, out->base + at);
  }
  if (rc == HVDS_SUCCESS) c->union_rows = (int64_t)rows;
  free(q);
  return rc;
}

/* Adds the received parts into this rank's range of the dense result, then gathers all ranges. */
static hvds_result_t reduce_gather(hvds_sparse_ctx_t* c, dsar_t* x, hvds_sstream_t* out) {
  const hvds_sparse_layout_t* lay = &c->lay;
  int P = c->p->size, r = c->p->rank;
  size_t rb = hvds__sparse_row_bytes(lay);
  size_t lo = range_lo(lay->dim, P, r), len = range_len(lay->dim, P, r);
  char* acc = out->base + lo * rb;
  memset(acc, 0, len * rb);
  for (int j = 0; j < P; j++) {
    hvds_sstream_t part;
    hvds__sstream_view(lay, x->rbuf + x->roff[j], lo, len, x->rcount[j],
                       x->rcount[j] == len && len > 0, &part);
    hvds__sstream_add_into(lay, acc, &part);
  }
  if (c->quant_bits != 0) return gather_quantized(c, x, out);
  // Every range is dense now: sbytes becomes the allgather's block sizes.
  for (int j = 0; j < P; j++) x->sbytes[j] = range_len(lay->dim, P, j) * rb;
  return hvds__allgatherv(c->p, out->base, x->sbytes, &c->coll);
}

hvds_result_t hvds__sparse_run_dsar(hvds_sparse_ctx_t* c, hvds_sstream_t* in, hvds_sstream_t* out) {
  const hvds_sparse_layout_t* lay = &c->lay;
  size_t P = (size_t)c->p->size;
  *out = (hvds_sstream_t){0, lay->dim, 0, 0, NULL, NULL};
  if (lay->dim == 0) return HVDS_SUCCESS;  // nothing to move on any rank
  dsar_t x = {0};
  x.soff = calloc(4 * P, sizeof(size_t));
  x.scount = calloc(2 * P, sizeof(uint64_t));
  hvds_result_t rc = HVDS_SUCCESS;
  if (x.soff == NULL || x.scount == NULL) {
    rc = hvds__sparse_nomem(c, "dsar_split_allgather");
  } else {
    x.sbytes = x.soff + P, x.roff = x.soff + 2 * P, x.rbytes = x.soff + 3 * P;
    x.rcount = x.scount + P;
    rc = exchange(c, in, &x);
  }
  if (rc == HVDS_SUCCESS && hvds__sstream_alloc(lay, 0, lay->dim, lay->dim, 1, out) != HVDS_SUCCESS)
    rc = hvds__sparse_nomem(c, "dsar_split_allgather");
  if (rc == HVDS_SUCCESS) rc = reduce_gather(c, &x, out);
  if (rc != HVDS_SUCCESS) hvds__sstream_free(out);
  free(x.soff);
  free(x.scount);
  free(x.sbuf);
  free(x.rbuf);
  return rc;
}
