/* SSAR_Split_allgather (SparCML, static sparse allreduce: split, reduce, sparse allgather).
 *
 * Algorithm: fold to P2 = 2^floor(log2 P) ranks (sparse_internal.h). Cut [0, N) into P2 equal
 * ranges; virtual rank j owns range j.
 *   Split: every rank cuts its stream into P2 parts (each sparse or dense by the byte rule on its
 *     own range), exchanges the entry counts, then sends part j to virtual rank j (pairwise
 *     all-to-all).
 *   Reduce: the owner merges the P2 parts of its range in a fixed tree order.
 *   Allgather: recursive doubling, first of the reduced parts' entry counts, then of the parts
 *     themselves, into one buffer in range order; the blocks are disjoint and ascending, so the
 *     result is their concatenation (dense if the byte rule says so over [0, N), or if any block
 *     is dense). Dense blocks are kept whole: no entry is ever dropped (SparCML's
 *     re-sparsification drops |v| <= 1e-8), and none is made up from a dense block's zeros.
 *   Unfold: the result goes back to the ranks that sat out.
 * Steps: 2 (P2 - 1) for the split, 2 log2(P2) for the allgather, plus fold and unfold.
 * Cost: (P - 1 + L) alpha + (P - 1)/P (k + K) s beta; beats recursive doubling when supports
 * overlap and k is large.
 * Packed allgather (c->packed: always with c->quant_bits 2, 4 or 8, SparCML section 4; at full
 * precision where the cost model says the link is slow enough): each owner reduces its range in
 * full precision, turns it dense when that is smaller packed (hvds__sparse_qdense_rule), and
 * packs it once with its indices delta-coded (losslessly) and its values quantized or as they are
 * (sparse_quant.h); the entry counts and packed sizes are gathered, then the packed ranges, and
 * every rank, the owner included, unpacks them all. The allgather's bytes per entry drop from
 * index + row bytes to about a byte or two of index gap + row bytes (row * bits / 8 quantized).
 * Preconditions: Sum/Average. Results are bitwise identical on every rank: each range is reduced
 * by one owner (and quantized by it, with a seed every rank derives alike).
 *
 * Ranges held for P2 = 4 (ranges A B C D; * = reduced over all ranks):
 *
 *   step         | v = 0   | v = 1   | v = 2   | v = 3
 *   -------------+---------+---------+---------+--------
 *   split+reduce | A*      | B*      | C*      | D*
 *   gather m 1   | A*B*    | A*B*    | C*D*    | C*D*
 *   gather m 2   | A*B*C*D*| A*B*C*D*| A*B*C*D*| A*B*C*D*
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quantize.h"
#include "sparse_internal.h"
#include "sparse_quant.h"

typedef struct {
  hvds_sparse_ctx_t* c;
  int m, v;                  /* virtual ranks, this one's */
  int* map;                  /* virtual -> real rank */
  size_t *soff, *sbytes;     /* split parts in sbuf */
  size_t *roff, *rbytes;     /* received parts of the own range in rbuf */
  size_t* goff;              /* m + 1 offsets of the reduced parts in gbuf */
  size_t* qoff;              /* m + 1 offsets of the packed parts (packed allgather) */
  uint64_t *scount, *rcount; /* entries per part sent / received */
  uint64_t* gcount;          /* entries of every reduced part */
  uint64_t* gsize;           /* packed: entries and packed bytes of every reduced part */
  hvds_sstream_t* parts;     /* views of the received parts */
  char *sbuf, *rbuf, *gbuf;
} sag_t;

static void sag_free(sag_t* x) {
  free(x->map);
  free(x->soff);
  free(x->scount);
  free(x->parts);
  hvds__sparse_buf_free(x->sbuf);
  hvds__sparse_buf_free(x->rbuf);
  hvds__sparse_buf_free(x->gbuf);
}

static int sag_init(sag_t* x, hvds_sparse_ctx_t* c, const hvds_sparse_fold_t* f) {
  size_t m = (size_t)f->p2;
  *x = (sag_t){.c = c, .m = f->p2, .v = f->v};
  x->map = malloc(m * sizeof(int));
  x->soff = calloc(6 * m + 2, sizeof(size_t));
  x->scount = calloc(5 * m, sizeof(uint64_t));
  x->parts = calloc(m, sizeof(hvds_sstream_t));
  if (x->map == NULL || x->soff == NULL || x->scount == NULL || x->parts == NULL) return 0;
  hvds__sparse_fold_map(f, x->map);
  x->sbytes = x->soff + m;
  x->roff = x->soff + 2 * m;
  x->rbytes = x->soff + 3 * m;
  x->goff = x->soff + 4 * m;
  x->qoff = x->soff + 5 * m + 1;
  x->rcount = x->scount + m;
  x->gcount = x->scount + 2 * m;
  x->gsize = x->scount + 3 * m;
  return 1;
}

static size_t part_lo(const sag_t* x, int j) {
  return hvds__sparse_part_lo(0, x->c->lay.dim, x->m, j);
}
static size_t part_len(const sag_t* x, int j) { return part_lo(x, j + 1) - part_lo(x, j); }
static int part_dense(const sag_t* x, int j, uint64_t n) { return n > 0 && n == part_len(x, j); }

/* Replaces sparse ranged s by the dense stream of its range. */
static hvds_result_t densify(const hvds_sparse_layout_t* lay, hvds_sstream_t* s) {
  hvds_sstream_t d;
  if (hvds__sstream_alloc(lay, s->lo, s->len, s->len, 1, &d) != HVDS_SUCCESS)
    return HVDS_SYSTEM_ERROR;
  memset(d.base, 0, s->len * hvds__sparse_row_bytes(lay));
  hvds__sstream_add_into(lay, d.base, s);
  hvds__sstream_free(s);
  *s = d;
  return HVDS_SUCCESS;
}

/* Split and reduce: this rank's range, summed over all virtual ranks, into red. */
static hvds_result_t split_reduce(sag_t* x, const hvds_sstream_t* acc, hvds_sstream_t* red) {
  const hvds_sparse_layout_t* lay = &x->c->lay;
  if (hvds__sstream_split(lay, acc, x->m, &x->sbuf, x->soff, x->sbytes, x->scount) != HVDS_SUCCESS)
    return hvds__sparse_nomem(x->c, "ssar_split_allgather");
  hvds_result_t rc = hvds__sparse_alltoall_u64(x->c, x->map, x->m, x->v, x->scount, x->rcount);
  if (rc != HVDS_SUCCESS) return rc;
  size_t total = 0, lo = part_lo(x, x->v), len = part_len(x, x->v);
  for (int j = 0; j < x->m; j++) {
    x->roff[j] = total;
    x->rbytes[j] = hvds__sstream_bytes(lay, x->rcount[j], part_dense(x, x->v, x->rcount[j]));
    total += x->rbytes[j];
  }
  x->rbuf = hvds__sparse_buf_alloc(total);
  if (x->rbuf == NULL) return hvds__sparse_nomem(x->c, "ssar_split_allgather");
  rc = hvds__sparse_alltoallv(x->c, x->map, x->m, x->v, x->sbuf, x->soff, x->sbytes, x->rbuf,
                              x->roff, x->rbytes);
  if (rc != HVDS_SUCCESS) return rc;
  for (int j = 0; j < x->m; j++)
    hvds__sstream_view(lay, x->rbuf + x->roff[j], lo, len, x->rcount[j],
                       part_dense(x, x->v, x->rcount[j]), &x->parts[j]);
  rc = hvds__sstream_merge_many(lay, x->parts, x->m, 1, red);
  if (rc == HVDS_SUCCESS && x->c->packed && !red->dense &&
      hvds__sparse_qdense_rule(lay, red->n, len, x->c->quant_bits))
    rc = densify(lay, red);
  if (rc != HVDS_SUCCESS) return hvds__sparse_nomem(x->c, "ssar_split_allgather");
  return HVDS_SUCCESS;
}

/* Offsets in gbuf of the reduced parts in the stream layout, from their counts. */
static hvds_result_t gbuf_alloc(sag_t* x) {
  const hvds_sparse_layout_t* lay = &x->c->lay;
  x->goff[0] = 0;
  for (int j = 0; j < x->m; j++)
    x->goff[j + 1] =
        x->goff[j] + hvds__sstream_bytes(lay, x->gcount[j], part_dense(x, j, x->gcount[j]));
  x->gbuf = hvds__sparse_buf_alloc(x->goff[x->m]);
  return x->gbuf != NULL ? HVDS_SUCCESS : hvds__sparse_nomem(x->c, "ssar_split_allgather");
}

/* Reduced part j as a block: its indices, none when dense. */
static hvds_qblock_shape_t part_shape(const sag_t* x, int j) {
  uint64_t n = x->gcount[j];
  int dense = part_dense(x, j, n);
  return (hvds_qblock_shape_t){n, dense ? 0 : n * hvds__sparse_idx_bytes(&x->c->lay), !dense};
}

/* The allgather of the reduced ranges, packed: this rank packs its range, the ranges'
 * entry counts and packed sizes are gathered, then the packed ranges, and every one (this
 * rank's too) is unpacked into gbuf. */
static hvds_result_t gather_packed(sag_t* x, const hvds_sstream_t* red) {
  const hvds_sparse_layout_t* lay = &x->c->lay;
  int bits = x->c->quant_bits, m = x->m, v = x->v;
  x->gcount[v] = red->n;
  hvds_qblock_shape_t me = part_shape(x, v);
  char* mine = hvds__sparse_buf_alloc(hvds__sparse_qblock_bound(lay, &me, bits));
  if (mine == NULL) return hvds__sparse_nomem(x->c, "ssar_split_allgather");
  size_t packed = 0;
  uint64_t seed = hvds__quant_seed(x->c->zen_seed, x->c->tag, (uint64_t)v);
  hvds_result_t rc = hvds__sparse_qblock_pack(lay, bits, seed, red->base, &me, mine, &packed);
  for (int j = 0; j <= m; j++) x->qoff[j] = (size_t)j * 2 * sizeof(uint64_t);
  x->gsize[2 * v] = red->n, x->gsize[2 * v + 1] = packed;
  if (rc == HVDS_SUCCESS)
    rc = hvds__sparse_rd_allgather(x->c, x->map, m, v, (char*)x->gsize, x->qoff);
  char* q = NULL;
  if (rc == HVDS_SUCCESS) {
    x->qoff[0] = 0;
    for (int j = 0; j < m; j++) {
      x->gcount[j] = x->gsize[2 * j];
      x->qoff[j + 1] = x->qoff[j] + x->gsize[2 * j + 1];
    }
    rc = gbuf_alloc(x);
  }
  if (rc == HVDS_SUCCESS && (q = hvds__sparse_buf_alloc(x->qoff[m])) == NULL)
    rc = hvds__sparse_nomem(x->c, "ssar_split_allgather");
  if (rc == HVDS_SUCCESS) {
    memcpy(q + x->qoff[v], mine, packed);
    rc = hvds__sparse_rd_allgather(x->c, x->map, m, v, q, x->qoff);
  }
  uint64_t nonzero = 0;
  for (int j = 0; j < m && rc == HVDS_SUCCESS; j++) {
    hvds_qblock_shape_t sj = part_shape(x, j);
    rc = hvds__sparse_qblock_unpack(lay, bits, q + x->qoff[j], x->qoff[j + 1] - x->qoff[j], &sj,
                                    x->gbuf + x->goff[j], &nonzero);
    if (rc == HVDS_INTERNAL_ERROR)
      snprintf(x->c->p->error, sizeof x->c->p->error,
               "ssar_split_allgather: the packed range of virtual rank %d does not decode", j);
  }
  if (rc == HVDS_SUCCESS) x->c->union_rows = (int64_t)nonzero;
  hvds__sparse_buf_free(mine);
  hvds__sparse_buf_free(q);
  return rc;
}

/* Allgather of the reduced ranges: counts, then the blocks, by recursive doubling. */
static hvds_result_t gather(sag_t* x, const hvds_sstream_t* red) {
  if (x->c->packed) return gather_packed(x, red);
  for (int j = 0; j <= x->m; j++) x->goff[j] = (size_t)j * sizeof(uint64_t);
  x->gcount[x->v] = red->n;
  hvds_result_t rc = hvds__sparse_rd_allgather(x->c, x->map, x->m, x->v, (char*)x->gcount, x->goff);
  if (rc == HVDS_SUCCESS) rc = gbuf_alloc(x);
  if (rc != HVDS_SUCCESS) return rc;
  size_t mine = x->goff[x->v + 1] - x->goff[x->v];
  if (mine > 0) memcpy(x->gbuf + x->goff[x->v], red->base, mine);
  return hvds__sparse_rd_allgather(x->c, x->map, x->m, x->v, x->gbuf, x->goff);
}

/* Writes gathered block j (a view b) into out: dense out takes rows at their indices, sparse
 * out appends entries from entry e on. */
static void place_block(const sag_t* x, const hvds_sstream_t* b, hvds_sstream_t* out, size_t e) {
  const hvds_sparse_layout_t* lay = &x->c->lay;
  size_t rb = hvds__sparse_row_bytes(lay), isz = hvds__sparse_idx_bytes(lay);
  char *ov = hvds__sstream_val(lay, out), *bv = hvds__sstream_val(lay, b);
  if (out->dense) {
    if (b->dense) memcpy(ov + b->lo * rb, bv, b->len * rb);
    for (size_t i = 0; !b->dense && i < b->n; i++)
      hvds__sparse_row_copy(ov + (size_t)hvds__sparse_idx_get(lay, b->base, i) * rb, bv + i * rb,
                            rb);
    return;
  }
  if (b->n == 0) return;
  if (b->dense)
    for (size_t i = 0; i < b->n; i++)
      hvds__sparse_idx_set(lay, out->base, e + i, (int64_t)(b->lo + i));
  else
    memcpy(out->base + e * isz, b->base, b->n * isz);
  memcpy(ov + e * rb, bv, b->n * rb);
}

/* The result over [0, N): the gathered blocks in range order, dense by the byte rule, and
 * dense whenever a block is: a dense block no longer says which of its positions some rank sent,
 * and a sparse result must hold exactly those (not the others, with zeros). */
static hvds_result_t assemble(sag_t* x, hvds_sstream_t* out) {
  const hvds_sparse_layout_t* lay = &x->c->lay;
  uint64_t total = 0;
  int dense_block = 0;
  for (int j = 0; j < x->m; j++) {
    total += x->gcount[j];
    dense_block |= part_dense(x, j, x->gcount[j]);
  }
  int dense = dense_block || hvds__sparse_dense_rule(lay, total, lay->dim);
  if (hvds__sstream_alloc(lay, 0, lay->dim, dense ? lay->dim : total, dense, out) != HVDS_SUCCESS)
    return hvds__sparse_nomem(x->c, "ssar_split_allgather");
  if (dense) memset(out->base, 0, lay->dim * hvds__sparse_row_bytes(lay));
  size_t e = 0;
  for (int j = 0; j < x->m; j++) {
    hvds_sstream_t b;
    hvds__sstream_view(lay, x->gbuf + x->goff[j], part_lo(x, j), part_len(x, j), x->gcount[j],
                       part_dense(x, j, x->gcount[j]), &b);
    place_block(x, &b, out, e);
    e += b.n;
  }
  return HVDS_SUCCESS;
}

/* Split, reduce, gather and assemble among the virtual ranks; acc becomes the result. */
static hvds_result_t run_virtual(hvds_sparse_ctx_t* c, const hvds_sparse_fold_t* f,
                                 hvds_sstream_t* acc) {
  sag_t x;
  hvds_sstream_t red = {0, 0, 0, 0, NULL, NULL}, res;
  hvds_result_t rc =
      sag_init(&x, c, f) ? HVDS_SUCCESS : hvds__sparse_nomem(c, "ssar_split_allgather");
  if (rc == HVDS_SUCCESS) rc = split_reduce(&x, acc, &red);
  if (rc == HVDS_SUCCESS) rc = gather(&x, &red);
  if (rc == HVDS_SUCCESS) rc = assemble(&x, &res);
  hvds__sstream_free(&red);
  sag_free(&x);
  if (rc != HVDS_SUCCESS) return rc;
  hvds__sstream_free(acc);
  *acc = res;
  return HVDS_SUCCESS;
}

/* With a quantized gather, the ranks that sat out take the union size counted before
 * quantization from their partner (the result they receive has values rounded to zero). */
static hvds_result_t unfold_union(hvds_sparse_ctx_t* c, const hvds_sparse_fold_t* f) {
  int r = c->p->rank;
  if (c->quant_bits == 0 || r >= 2 * f->rem) return HVDS_SUCCESS;
  uint64_t n = (uint64_t)c->union_rows;
  if (r % 2) return hvds__p2p_send(c->p, r - 1, &n, sizeof n, c->tag);
  hvds_result_t rc = hvds__p2p_recv(c->p, r + 1, &n, sizeof n, c->tag);
  if (rc == HVDS_SUCCESS) c->union_rows = (int64_t)n;
  return rc;
}

hvds_result_t hvds__sparse_run_ssar_sag(hvds_sparse_ctx_t* c, hvds_sstream_t* in,
                                        hvds_sstream_t* out) {
  hvds_result_t rc = hvds__sparse_run_folded(c, in, out, run_virtual);
  if (rc != HVDS_SUCCESS) return rc;
  hvds_sparse_fold_t f;
  hvds__sparse_fold_plan(c->p->size, c->p->rank, &f);
  rc = unfold_union(c, &f);
  if (rc != HVDS_SUCCESS) hvds__sstream_free(out);
  return rc;
}
