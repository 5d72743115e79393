/* Hierarchical allreduce (Horovod's "torus" variant) on the global set.
 *
 * Algorithm: with L ranks per host and H hosts, the buffer is cut into L blocks (element
 * granularity, the first count % L blocks one element longer).
 *   1. local reduce-scatter over rt.local (shared memory): local rank i ends with block i
 *      reduced over its host;
 *   2. cross allreduce of block i over rt.cross (TCP; the ranks with local rank i, one per host):
 *      block i reduced over the job;
 *   3. local all-gather over rt.local: every rank has every block.
 * Steps: (L-1) + cross allreduce of N/L + (L-1). Each host link carries 2 (H-1)/H N bytes
 * instead of the flat ring's 2 (P-1)/P N, and the intra-host traffic never touches TCP.
 * Preconditions: every host has L ranks (homogeneous); op commutative and associative.
 *
 * Two hosts (H = 2), the common case, are pipelined: the buffer goes in chunks of L x 1 MiB,
 * and the cross phase of a chunk is a single exchange with the other host's rank (both add the
 * other's block: a + b == b + a exactly, so both hosts hold identical bits), posted right after
 * the chunk's reduce-scatter and waited for only after the next chunk's reduce-scatter and the
 * previous chunk's all-gather. The kernel moves the exchange (it fits the socket buffers) while
 * this thread does the local phases, so the time is about the larger of the two, not the sum.
 * More hosts run the three phases one after the other over the whole buffer.
 *
 * Block ownership for L = 2 local ranks on H = 2 hosts (global ranks 0,1 | 2,3), "b0:h0" = block
 * 0 reduced over host 0's ranks:
 *
 *   after | rank 0 (h0 l0) | rank 1 (h0 l1) | rank 2 (h1 l0) | rank 3 (h1 l1)
 *   ------+----------------+----------------+----------------+---------------
 *    1    | b0:h0          | b1:h0          | b0:h1          | b1:h1
 *    2    | b0:all         | b1:all         | b0:all         | b1:all
 *    3    | b0,b1:all      | b0,b1:all      | b0,b1:all      | b0,b1:all
 *
 * With every rank on one host (LOCAL_ONLY: Gloo world; SHM_WORLD: shared-memory world) the
 * whole allreduce goes through the shared segment (ops/shm/shm_coll.c) instead. Tags: the set's
 * tag for step 1, with bit 40 for step 3 and bit 41 for step 2, so the phases' messages never
 * meet even between ranks a phase apart; chunks reuse their phase's tag (FIFO per peer and tag).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hierarchy.h"
#include "log.h"
#include "p2p.h"
#include "reduce.h"
#include "shm_p2p.h"

#define rt hvds__rt

#define TAG_ALLGATHER (1ull << 40)
#define TAG_CROSS (1ull << 41)
#define PIPE_BLOCK_BYTES ((size_t)1 << 20) /* this rank's block of one pipelined chunk */

int hvds__hier_wanted(const hvds_pset_t* s, size_t bytes) {
  if (s->id != 0) return 0;
  switch ((hvds_hier_mode_t)rt.hier_mode) {
    case HVDS_HIER_ALWAYS:
    case HVDS_HIER_LOCAL_ONLY:
    case HVDS_HIER_SHM_WORLD:
      return 1;
    case HVDS_HIER_AUTO:
      return hvds__hier_cost_hier(bytes) < hvds__hier_cost_flat(bytes);
    default:
      return 0;
  }
}

/* Puts comm's failure into the set's communicator, where the coordinator reports it from. */
static hvds_result_t phase_failed(hvds_pset_t* s, hvds_p2p_t* comm, const char* phase,
                                  hvds_result_t rc) {
  if (comm != s->comm)
    snprintf(s->comm->error, sizeof s->comm->error, "hierarchical allreduce, %s: %.400s", phase,
             comm->error);
  return rc;
}

/* The L blocks of n elements: counts, bytes, and this rank's offset (bytes). */
static size_t split(size_t n, int L, size_t esz, size_t* counts, size_t* bytes) {
  size_t off = 0;
  for (int i = 0; i < L; i++) {
    counts[i] = n / (size_t)L + ((size_t)i < n % (size_t)L);
    bytes[i] = counts[i] * esz;
    if (i < rt.local->rank) off += bytes[i];
  }
  return off;
}

/* The three phases one after the other over the whole buffer (any number of hosts). */
static hvds_result_t hier_phases(hvds_pset_t* s, char* buf, size_t count, hvds_dtype_t dtype,
                                 hvds_reduce_op_t op, const hvds_coll_opts_t* o, size_t* counts,
                                 size_t* bytes) {
  int me = rt.local->rank;
  size_t esz = hvds__dtype_bytes(dtype);
  size_t off = split(count, rt.local->size, esz, counts, bytes);
  hvds_coll_opts_t lo = *o, co = *o;
  co.tag = o->tag | TAG_CROSS;
  hvds_result_t rc = hvds__reducescatter(rt.local, buf, counts, dtype, op, &lo);
  if (rc != HVDS_SUCCESS) return phase_failed(s, rt.local, "local reduce-scatter", rc);
  if (counts[me] > 0) {
    rc = hvds__allreduce(rt.cross, buf + off, counts[me], dtype, op, &co);
    if (rc != HVDS_SUCCESS) return phase_failed(s, rt.cross, "cross-host allreduce", rc);
  }
  lo.tag = o->tag | TAG_ALLGATHER;
  rc = hvds__allgatherv(rt.local, buf, bytes, &lo);
  return rc == HVDS_SUCCESS ? rc : phase_failed(s, rt.local, "local all-gather", rc);
}

/* State of the two-host pipeline; slot t % 2 belongs to chunk t. */
typedef struct {
  hvds_pset_t* s;
  char* buf;
  size_t count, esz, per_chunk;
  hvds_dtype_t dtype;
  hvds_reduce_op_t op;
  const hvds_coll_opts_t* o;
  size_t *counts, *bytes;
  char* scratch[2];        /* the other host's block of chunk t */
  size_t off[2], len[2];   /* this rank's block of chunk t: offset in buf, bytes */
  hvds_p2p_req_t* reqs[4]; /* recv slot 0, recv slot 1, send slot 0, send slot 1 */
} pipe_t;

/* Chunk t's local reduce-scatter, then its exchange is posted. */
static hvds_result_t pipe_start(pipe_t* x, size_t t) {
  char* chunk = x->buf + t * x->per_chunk * x->esz;
  size_t n =
      x->count - t * x->per_chunk < x->per_chunk ? x->count - t * x->per_chunk : x->per_chunk;
  size_t off = split(n, rt.local->size, x->esz, x->counts, x->bytes);
  hvds_coll_opts_t lo = *x->o;
  hvds_result_t rc = hvds__reducescatter(rt.local, chunk, x->counts, x->dtype, x->op, &lo);
  if (rc != HVDS_SUCCESS) return phase_failed(x->s, rt.local, "local reduce-scatter", rc);
  int k = (int)(t % 2), peer = 1 - rt.cross->rank;
  x->off[k] = (size_t)(chunk - x->buf) + off;
  x->len[k] = x->bytes[rt.local->rank];
  if (x->len[k] == 0) return HVDS_SUCCESS;
  uint64_t tag = x->o->tag | TAG_CROSS;
  rc = hvds__p2p_irecv(rt.cross, peer, x->scratch[k], x->len[k], tag, &x->reqs[k]);
  if (rc == HVDS_SUCCESS)
    rc = hvds__p2p_isend(rt.cross, peer, x->buf + x->off[k], x->len[k], tag, &x->reqs[2 + k]);
  return rc == HVDS_SUCCESS ? rc : phase_failed(x->s, rt.cross, "cross-host exchange", rc);
}

/* Chunk t's exchange completes, the other host's block is added, the chunk is all-gathered. */
static hvds_result_t pipe_finish(pipe_t* x, size_t t) {
  int k = (int)(t % 2);
  hvds_p2p_req_t* mine[2] = {x->reqs[k], x->reqs[2 + k]};
  x->reqs[k] = x->reqs[2 + k] = NULL;
  hvds_result_t rc = hvds__p2p_wait_all(rt.cross, mine, 2);
  if (rc != HVDS_SUCCESS) return phase_failed(x->s, rt.cross, "cross-host exchange", rc);
  if (x->len[k] > 0)
    rc = hvds__reduce(x->buf + x->off[k], x->scratch[k], x->len[k] / x->esz, x->dtype, x->op);
  if (rc != HVDS_SUCCESS) return rc;
  char* chunk = x->buf + t * x->per_chunk * x->esz;
  size_t n =
      x->count - t * x->per_chunk < x->per_chunk ? x->count - t * x->per_chunk : x->per_chunk;
  split(n, rt.local->size, x->esz, x->counts, x->bytes);
  hvds_coll_opts_t lo = *x->o;
  lo.tag = x->o->tag | TAG_ALLGATHER;
  rc = hvds__allgatherv(rt.local, chunk, x->bytes, &lo);
  return rc == HVDS_SUCCESS ? rc : phase_failed(x->s, rt.local, "local all-gather", rc);
}

/* Two hosts: chunk t+1's reduce-scatter and chunk t-1's all-gather run while chunk t's
 * exchange is on the wire. */
static hvds_result_t hier_two_hosts(hvds_pset_t* s, char* buf, size_t count, hvds_dtype_t dtype,
                                    hvds_reduce_op_t op, const hvds_coll_opts_t* o, size_t* counts,
                                    size_t* bytes) {
  size_t esz = hvds__dtype_bytes(dtype), L = (size_t)rt.local->size;
  pipe_t x = {s,     buf,          count,  esz,    PIPE_BLOCK_BYTES / esz * L, dtype, op, o, counts,
              bytes, {NULL, NULL}, {0, 0}, {0, 0}, {NULL, NULL, NULL, NULL}};
  size_t chunks = (count + x.per_chunk - 1) / x.per_chunk;
  size_t block = (x.per_chunk < count ? x.per_chunk : count) / L * esz + esz;
  x.scratch[0] = malloc(2 * block);
  if (x.scratch[0] == NULL) return hvds__coll_nomem(s->comm, "hierarchical allreduce");
  x.scratch[1] = x.scratch[0] + block;
  hvds_result_t rc = HVDS_SUCCESS;
  for (size_t t = 0; t <= chunks && rc == HVDS_SUCCESS; t++) {
    if (t < chunks) rc = pipe_start(&x, t);
    if (rc == HVDS_SUCCESS && t >= 1) rc = pipe_finish(&x, t - 1);
  }
  rc = hvds__p2p_finish(rt.cross, rc, x.reqs, 4);  // nothing is pending unless a step failed
  free(x.scratch[0]);
  return rc;
}

int hvds__hier_segment_only(const hvds_pset_t* s) {
  return s->id == 0 &&
         (rt.hier_mode == HVDS_HIER_LOCAL_ONLY || rt.hier_mode == HVDS_HIER_SHM_WORLD);
}

hvds_result_t hvds__hier_allreduce_pieces(hvds_pset_t* s, const hvds_shm_piece_t* pieces, int n,
                                          hvds_dtype_t dtype, hvds_reduce_op_t op) {
  hvds_p2p_t* p = rt.hier_mode == HVDS_HIER_SHM_WORLD ? rt.world : rt.local;
  hvds_result_t rc = hvds__shm_allreduce_pieces(p, pieces, n, dtype, op);
  return rc == HVDS_SUCCESS ? rc : phase_failed(s, p, "shared memory segment", rc);
}

hvds_result_t hvds__hier_allreduce(hvds_pset_t* s, void* buf, size_t count, hvds_dtype_t dtype,
                                   hvds_reduce_op_t op, const hvds_coll_opts_t* o) {
  if (rt.hier_mode == HVDS_HIER_LOCAL_ONLY || rt.hier_mode == HVDS_HIER_SHM_WORLD) {
    hvds_p2p_t* p = rt.hier_mode == HVDS_HIER_SHM_WORLD ? rt.world : rt.local;
    hvds_result_t rc = hvds__shm_allreduce(p, buf, count, dtype, op);
    return rc == HVDS_SUCCESS ? rc : phase_failed(s, p, "shared memory segment", rc);
  }
  if (count == 0) return HVDS_SUCCESS;
  size_t* counts = malloc((size_t)rt.local->size * 2 * sizeof(size_t));
  if (counts == NULL) return hvds__coll_nomem(s->comm, "hierarchical allreduce");
  size_t* bytes = counts + rt.local->size;
  hvds_result_t rc = rt.cross->size == 2
                         ? hier_two_hosts(s, buf, count, dtype, op, o, counts, bytes)
                         : hier_phases(s, buf, count, dtype, op, o, counts, bytes);
  free(counts);
  return rc;
}
