/* Exchange steps shared by the sparse algorithms (sparse_internal.h). Every payload of unknown
 * size is preceded by its entry count, because the transports need exact receive sizes (MPI's
 * maximum-size receives have no equivalent in Gloo or NCCL). Both sides derive the byte count
 * from the entry count, so empty payloads are simply not sent; a packed stream's bytes travel
 * with its count. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "reduce.h"
#include "sparse_internal.h"
#include "sparse_quant.h"

hvds_result_t hvds__sparse_nomem(hvds_sparse_ctx_t* c, const char* what) {
  return hvds__coll_nomem(c->p, what);
}

/* Pipelined copy steps: no reduction, segments of the dense chunk size. */
static hvds_p2p_seg_t copy_seg(const hvds_sparse_ctx_t* c) {
  return (hvds_p2p_seg_t){hvds__coll_segment(&c->coll, 1), NULL, HVDS_UINT8, HVDS_SUM};
}

static int real_of(const int* map, int v) { return map != NULL ? map[v] : v; }

/* A sparse stream of n entries as a packed block (sparse_quant.h). */
static hvds_qblock_shape_t stream_shape(const hvds_sparse_layout_t* lay, size_t n) {
  return (hvds_qblock_shape_t){n, n * hvds__sparse_idx_bytes(lay), 1};
}

/* Packs s for xchg_packed: *payload and *bytes to send (a dense stream as it is, a sparse one
 * packed into *packed, which the caller frees). */
static hvds_result_t pack_stream(const hvds_sparse_layout_t* lay, const hvds_sstream_t* s,
                                 char** packed, const char** payload, size_t* bytes) {
  *packed = NULL, *payload = s->base, *bytes = hvds__sstream_bytes(lay, s->n, s->dense);
  if (s->dense || s->n == 0) return HVDS_SUCCESS;
  hvds_qblock_shape_t shape = stream_shape(lay, s->n);
  if ((*packed = hvds__sparse_buf_alloc(hvds__sparse_qblock_bound(lay, &shape, 0))) == NULL)
    return HVDS_SYSTEM_ERROR;
  *payload = *packed;
  return hvds__sparse_qblock_pack(lay, 0, 0, s->base, &shape, *packed, bytes);
}

/* hvds__sparse_xchg for c->packed: a sparse payload goes packed (indices delta-coded, values as
 * they are), a dense one as it is; the entry count travels with the payload's bytes. */
static hvds_result_t xchg_packed(hvds_sparse_ctx_t* c, int to, const hvds_sstream_t* s, int from,
                                 size_t lo, size_t len, hvds_sstream_t* r) {
  const hvds_sparse_layout_t* lay = &c->lay;
  hvds_p2p_seg_t seg = copy_seg(c);
  char *packed = NULL, *in = NULL;
  const char* payload = NULL;
  uint64_t sh[2] = {0, 0}, rh[2] = {0, 0};  // entries, payload bytes
  size_t sbytes = 0;
  hvds_result_t rc = to >= 0 ? pack_stream(lay, s, &packed, &payload, &sbytes) : HVDS_SUCCESS;
  if (rc != HVDS_SUCCESS) {
    hvds__sparse_buf_free(packed);
    return rc == HVDS_SYSTEM_ERROR ? hvds__sparse_nomem(c, "sparse exchange") : rc;
  }
  sh[0] = to >= 0 ? s->n : 0, sh[1] = sbytes;
  rc = hvds__p2p_sendrecv_seg(c->p, to, sh, to >= 0 ? sizeof sh : 0, from, rh,
                              from >= 0 ? sizeof rh : 0, c->tag, &seg);
  int dense = rh[0] == len && len > 0;
  hvds_qblock_shape_t rs = stream_shape(lay, rh[0]);
  size_t most = dense       ? hvds__sstream_bytes(lay, len, 1)
                : rh[0] > 0 ? hvds__sparse_qblock_bound(lay, &rs, 0)
                            : 0;
  if (rc == HVDS_SUCCESS && from >= 0 &&
      (rh[0] > len || rh[1] > most || (dense && rh[1] != most))) {
    snprintf(c->p->error, sizeof c->p->error,
             "sparse: rank %d announced %llu entries in %llu bytes for a range of %zu", from,
             (unsigned long long)rh[0], (unsigned long long)rh[1], len);
    rc = HVDS_INTERNAL_ERROR;
  }
  if (rc == HVDS_SUCCESS && from >= 0 &&
      (hvds__sstream_alloc(lay, lo, len, rh[0], dense, r) != HVDS_SUCCESS ||
       (!dense && rh[1] > 0 && (in = hvds__sparse_buf_alloc(rh[1])) == NULL)))
    rc = hvds__sparse_nomem(c, "sparse exchange");
  if (rc == HVDS_SUCCESS)
    rc = hvds__p2p_sendrecv_seg(c->p, to, sbytes ? payload : NULL, sbytes, from,
                                dense ? r->base : in, from >= 0 ? rh[1] : 0, c->tag, &seg);
  uint64_t nonzero = 0;
  if (rc == HVDS_SUCCESS && in != NULL &&
      hvds__sparse_qblock_unpack(lay, 0, in, rh[1], &rs, r->base, &nonzero) != HVDS_SUCCESS) {
    snprintf(c->p->error, sizeof c->p->error,
             "sparse: the packed stream from rank %d does not decode", from);
    rc = HVDS_INTERNAL_ERROR;
  }
  hvds__sparse_buf_free(packed);
  hvds__sparse_buf_free(in);
  if (rc != HVDS_SUCCESS && r != NULL) hvds__sstream_free(r);
  return rc;
}

hvds_result_t hvds__sparse_xchg(hvds_sparse_ctx_t* c, int to, const hvds_sstream_t* s, int from,
                                size_t lo, size_t len, hvds_sstream_t* r) {
  if (r != NULL) *r = (hvds_sstream_t){lo, len, 0, 0, NULL, NULL};
  if (c->packed) return xchg_packed(c, to, s, from, lo, len, r);
  hvds_p2p_seg_t seg = copy_seg(c);
  uint64_t sn = to >= 0 ? s->n : 0, rn = 0;
  hvds_result_t rc = hvds__p2p_sendrecv_seg(c->p, to, &sn, to >= 0 ? 8 : 0, from, &rn,
                                            from >= 0 ? 8 : 0, c->tag, &seg);
  if (rc != HVDS_SUCCESS) return rc;
  if (from >= 0 && rn > len) {
    snprintf(c->p->error, sizeof c->p->error,
             "sparse: rank %d announced %llu entries for a range of %zu", from,
             (unsigned long long)rn, len);
    return HVDS_INTERNAL_ERROR;
  }
  if (from >= 0 &&
      hvds__sstream_alloc(&c->lay, lo, len, rn, rn == len && len > 0, r) != HVDS_SUCCESS)
    return hvds__sparse_nomem(c, "sparse exchange");
  size_t sbytes = to >= 0 ? hvds__sstream_bytes(&c->lay, s->n, s->dense) : 0;
  size_t rbytes = from >= 0 ? hvds__sstream_bytes(&c->lay, r->n, r->dense) : 0;
  rc = hvds__p2p_sendrecv_seg(c->p, to, to >= 0 ? s->base : NULL, sbytes, from,
                              from >= 0 ? r->base : NULL, rbytes, c->tag, &seg);
  if (rc != HVDS_SUCCESS && r != NULL) hvds__sstream_free(r);
  return rc;
}

hvds_result_t hvds__sparse_alltoallv(hvds_sparse_ctx_t* c, const int* map, int m, int v,
                                     const char* sbuf, const size_t* soff, const size_t* sbytes,
                                     char* rbuf, const size_t* roff, const size_t* rbytes) {
  hvds_p2p_seg_t seg = copy_seg(c);
  if (sbytes[v] != rbytes[v]) {
    snprintf(c->p->error, sizeof c->p->error, "sparse alltoallv: own block %zu vs %zu bytes",
             sbytes[v], rbytes[v]);
    return HVDS_INTERNAL_ERROR;
  }
  if (sbytes[v] > 0) memcpy(rbuf + roff[v], sbuf + soff[v], sbytes[v]);
  for (int k = 1; k < m; k++) {
    // Step k: send to the virtual rank k ahead, receive from the one k behind.
    int to = (v + k) % m, from = (v - k + m) % m;
    hvds_result_t rc = hvds__p2p_sendrecv_seg(
        c->p, real_of(map, to), sbytes[to] ? sbuf + soff[to] : NULL, sbytes[to], real_of(map, from),
        rbytes[from] ? rbuf + roff[from] : NULL, rbytes[from], c->tag, &seg);
    if (rc != HVDS_SUCCESS) return rc;
  }
  return HVDS_SUCCESS;
}

/* w uint64 to and from each of the m virtual ranks: send[j * w ...] to j, recv[j * w ...] from
 * j. */
static hvds_result_t alltoall_words(hvds_sparse_ctx_t* c, const int* map, int m, int v,
                                    const uint64_t* send, uint64_t* recv, int w) {
  memcpy(&recv[v * w], &send[v * w], (size_t)w * 8);
  for (int k = 1; k < m; k++) {
    int to = (v + k) % m, from = (v - k + m) % m;
    hvds_result_t rc =
        hvds__p2p_sendrecv(c->p, real_of(map, to), &send[to * w], (size_t)w * 8, real_of(map, from),
                           &recv[from * w], (size_t)w * 8, c->tag);
    if (rc != HVDS_SUCCESS) return rc;
  }
  return HVDS_SUCCESS;
}

hvds_result_t hvds__sparse_alltoall_u64(hvds_sparse_ctx_t* c, const int* map, int m, int v,
                                        const uint64_t* send, uint64_t* recv) {
  return alltoall_words(c, map, m, v, send, recv, 1);
}

/* Receive offsets and bytes of blocks of rcount[j] sparse entries, one after another. */
static size_t stream_offsets(const hvds_sparse_layout_t* lay, int m, const uint64_t* rcount,
                             size_t* roff, size_t* rbytes) {
  size_t total = 0;
  for (int j = 0; j < m; j++) {
    roff[j] = total;
    rbytes[j] = hvds__sstream_bytes(lay, rcount[j], 0);
    total += rbytes[j];
  }
  return total;
}

/* hvds__sparse_alltoall_streams for c->packed: every block but the own one packed (its bound
 * apart, so packing needs no second pass), each peer's entry count and packed bytes exchanged
 * as one pair, the packed blocks exchanged, and each unpacked into *rbuf. */
static hvds_result_t alltoall_packed(hvds_sparse_ctx_t* c, const int* map, int m, int v,
                                     const char* sbuf, const size_t* soff, const uint64_t* scount,
                                     char** rbuf, size_t* roff, size_t* rbytes, uint64_t* rcount,
                                     size_t* sent) {
  const hvds_sparse_layout_t* lay = &c->lay;
  size_t* off = calloc(4 * (size_t)m, sizeof(size_t));       // packed: send offsets, bytes; receive
  uint64_t* pair = calloc(4 * (size_t)m, sizeof(uint64_t));  // sent (count, bytes), received
  char *psend = NULL, *precv = NULL;
  hvds_result_t rc = off != NULL && pair != NULL ? HVDS_SUCCESS : HVDS_SYSTEM_ERROR;
  size_t *psoff = off, *psbytes = off + m, *proff = off + 2 * m, *prbytes = off + 3 * m, all = 0;
  for (int j = 0; rc == HVDS_SUCCESS && j < m; j++) {
    hvds_qblock_shape_t sh = stream_shape(lay, scount[j]);
    psoff[j] = all;
    all += j != v && scount[j] > 0 ? hvds__sparse_qblock_bound(lay, &sh, 0) : 0;
  }
  if (rc == HVDS_SUCCESS && all > 0 && (psend = hvds__sparse_buf_alloc(all)) == NULL)
    rc = HVDS_SYSTEM_ERROR;
  *sent = 0;
  for (int j = 0; rc == HVDS_SUCCESS && j < m; j++) {
    hvds_qblock_shape_t sh = stream_shape(lay, scount[j]);
    if (j != v && scount[j] > 0)
      rc = hvds__sparse_qblock_pack(lay, 0, 0, sbuf + soff[j], &sh, psend + psoff[j], &psbytes[j]);
    pair[2 * j] = scount[j], pair[2 * j + 1] = psbytes[j];
    *sent += psbytes[j];
  }
  if (rc == HVDS_SYSTEM_ERROR) rc = hvds__sparse_nomem(c, "sparse all-to-all");
  if (rc == HVDS_SUCCESS) rc = alltoall_words(c, map, m, v, pair, pair + 2 * m, 2);
  size_t pall = 0;
  for (int j = 0; rc == HVDS_SUCCESS && j < m; j++) {
    hvds_qblock_shape_t sh = stream_shape(lay, pair[2 * m + 2 * j]);
    rcount[j] = pair[2 * m + 2 * j], prbytes[j] = pair[2 * m + 2 * j + 1], proff[j] = pall;
    pall += prbytes[j];
    if (rcount[j] > lay->dim ||
        (j != v && prbytes[j] > (rcount[j] > 0 ? hvds__sparse_qblock_bound(lay, &sh, 0) : 0))) {
      snprintf(c->p->error, sizeof c->p->error,
               "sparse: rank %d announced %llu entries in %llu bytes for a range of %zu",
               real_of(map, j), (unsigned long long)rcount[j], (unsigned long long)prbytes[j],
               lay->dim);
      rc = HVDS_INTERNAL_ERROR;
    }
  }
  size_t total = rc == HVDS_SUCCESS ? stream_offsets(lay, m, rcount, roff, rbytes) : 0;
  if (rc == HVDS_SUCCESS && ((*rbuf = hvds__sparse_buf_alloc(total)) == NULL ||
                             (pall > 0 && (precv = hvds__sparse_buf_alloc(pall)) == NULL)))
    rc = hvds__sparse_nomem(c, "sparse all-to-all");
  if (rc == HVDS_SUCCESS)
    rc = hvds__sparse_alltoallv(c, map, m, v, psend, psoff, psbytes, precv, proff, prbytes);
  if (rc == HVDS_SUCCESS && rbytes[v] > 0) memcpy(*rbuf + roff[v], sbuf + soff[v], rbytes[v]);
  for (int j = 0; rc == HVDS_SUCCESS && j < m; j++) {
    hvds_qblock_shape_t sh = stream_shape(lay, rcount[j]);
    uint64_t nonzero = 0;
    if (j == v || rcount[j] == 0) continue;
    if (hvds__sparse_qblock_unpack(lay, 0, precv + proff[j], prbytes[j], &sh, *rbuf + roff[j],
                                   &nonzero) != HVDS_SUCCESS) {
      snprintf(c->p->error, sizeof c->p->error,
               "sparse: the packed block from rank %d does not decode", real_of(map, j));
      rc = HVDS_INTERNAL_ERROR;
    }
  }
  hvds__sparse_buf_free(psend);
  hvds__sparse_buf_free(precv);
  free(off);
  free(pair);
  return rc;
}

hvds_result_t hvds__sparse_alltoall_streams(hvds_sparse_ctx_t* c, const int* map, int m, int v,
                                            const char* sbuf, const size_t* soff,
                                            const size_t* sbytes, const uint64_t* scount,
                                            char** rbuf, size_t* roff, size_t* rbytes,
                                            uint64_t* rcount, size_t* sent) {
  *rbuf = NULL;
  if (c->packed)
    return alltoall_packed(c, map, m, v, sbuf, soff, scount, rbuf, roff, rbytes, rcount, sent);
  hvds_result_t rc = hvds__sparse_alltoall_u64(c, map, m, v, scount, rcount);
  if (rc != HVDS_SUCCESS) return rc;
  for (int j = 0; j < m; j++)
    if (rcount[j] > c->lay.dim) {
      snprintf(c->p->error, sizeof c->p->error,
               "sparse: rank %d announced %llu entries for a range of %zu", real_of(map, j),
               (unsigned long long)rcount[j], c->lay.dim);
      return HVDS_INTERNAL_ERROR;
    }
  *sent = 0;
  for (int j = 0; j < m; j++) *sent += j != v ? sbytes[j] : 0;
  size_t total = stream_offsets(&c->lay, m, rcount, roff, rbytes);
  if ((*rbuf = hvds__sparse_buf_alloc(total)) == NULL)
    return hvds__sparse_nomem(c, "sparse all-to-all");
  return hvds__sparse_alltoallv(c, map, m, v, sbuf, soff, sbytes, *rbuf, roff, rbytes);
}

hvds_result_t hvds__sparse_rd_allgather(hvds_sparse_ctx_t* c, const int* map, int p2, int v,
                                        char* buf, const size_t* off) {
  hvds_p2p_seg_t seg = copy_seg(c);
  for (int mask = 1; mask < p2; mask <<= 1) {
    // This rank holds blocks [mine, mine + mask); the partner holds the adjacent group.
    int peer = v ^ mask, mine = v & ~(mask - 1), theirs = peer & ~(mask - 1);
    size_t sb = off[mine + mask] - off[mine], rb = off[theirs + mask] - off[theirs];
    hvds_result_t rc =
        hvds__p2p_sendrecv_seg(c->p, real_of(map, peer), sb ? buf + off[mine] : NULL, sb,
                               real_of(map, peer), rb ? buf + off[theirs] : NULL, rb, c->tag, &seg);
    if (rc != HVDS_SUCCESS) return rc;
  }
  return HVDS_SUCCESS;
}

hvds_result_t hvds__sparse_allgather_u64(hvds_sparse_ctx_t* c, const uint64_t* mine, int m,
                                         uint64_t* all) {
  size_t n = (size_t)c->p->size * (size_t)m;
  memset(all, 0, n * sizeof(uint64_t));
  memcpy(all + (size_t)c->p->rank * (size_t)m, mine, (size_t)m * sizeof(uint64_t));
  hvds_coll_opts_t o = c->coll;
  o.algorithm = HVDS_ALGO_RHD;
  return hvds__allreduce(c->p, all, n, HVDS_INT64, HVDS_SUM, &o);
}

/* ---- Fold to a power of two ---- */

void hvds__sparse_fold_plan(int size, int rank, hvds_sparse_fold_t* f) {
  int p2 = 1;
  while (p2 * 2 <= size) p2 *= 2;
  f->p2 = p2;
  f->rem = size - p2;
  f->v = rank >= 2 * f->rem ? rank - f->rem : (rank % 2 ? rank / 2 : -1);
}

int hvds__sparse_fold_real(const hvds_sparse_fold_t* f, int v) {
  return v < f->rem ? 2 * v + 1 : v + f->rem;
}

void hvds__sparse_fold_map(const hvds_sparse_fold_t* f, int* map) {
  for (int v = 0; v < f->p2; v++) map[v] = hvds__sparse_fold_real(f, v);
}

hvds_result_t hvds__sparse_fold(hvds_sparse_ctx_t* c, const hvds_sparse_fold_t* f,
                                hvds_sstream_t* acc) {
  int r = c->p->rank;
  if (r >= 2 * f->rem) return HVDS_SUCCESS;
  if (r % 2 == 0) {
    hvds_result_t rc = hvds__sparse_xchg(c, r + 1, acc, -1, 0, 0, NULL);
    hvds__sstream_free(acc);
    return rc;
  }
  hvds_sstream_t t;
  HVDS_CHECK(hvds__sparse_xchg(c, -1, NULL, r - 1, 0, c->lay.dim, &t));
  return hvds__sparse_merge_in(c, acc, &t, "sparse fold");
}

hvds_result_t hvds__sparse_merge_in(hvds_sparse_ctx_t* c, hvds_sstream_t* acc,
                                    hvds_sstream_t* received, const char* what) {
  hvds_sstream_t m;
  hvds_result_t rc = hvds__sstream_merge(&c->lay, acc, received, 1, &m);
  hvds__sstream_free(received);
  if (rc != HVDS_SUCCESS) return hvds__sparse_nomem(c, what);
  hvds__sstream_free(acc);
  *acc = m;
  return HVDS_SUCCESS;
}

hvds_result_t hvds__sparse_unfold(hvds_sparse_ctx_t* c, const hvds_sparse_fold_t* f,
                                  hvds_sstream_t* acc) {
  int r = c->p->rank;
  if (r >= 2 * f->rem) return HVDS_SUCCESS;
  if (r % 2) return hvds__sparse_xchg(c, r - 1, acc, -1, 0, 0, NULL);
  return hvds__sparse_xchg(c, -1, NULL, r + 1, 0, c->lay.dim, acc);
}

hvds_result_t hvds__sparse_run_folded(hvds_sparse_ctx_t* c, hvds_sstream_t* in, hvds_sstream_t* out,
                                      hvds_sparse_folded_fn body) {
  hvds_sparse_fold_t f;
  hvds__sparse_fold_plan(c->p->size, c->p->rank, &f);
  hvds_sstream_t acc = *in;  // take the input's memory
  *in = (hvds_sstream_t){0, c->lay.dim, 0, 0, NULL, NULL};
  hvds_result_t rc = hvds__sparse_fold(c, &f, &acc);
  if (rc == HVDS_SUCCESS && f.v >= 0) rc = body(c, &f, &acc);
  if (rc == HVDS_SUCCESS) rc = hvds__sparse_unfold(c, &f, &acc);
  if (rc != HVDS_SUCCESS) {
    hvds__sstream_free(&acc);
    return rc;
  }
  *out = acc;
  return HVDS_SUCCESS;
}
