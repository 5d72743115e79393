/* The shared-segment backend: with every rank of the job on one host, the global set's
 * allreduces meet in the host's shared segment (ops/shm/shm_coll.c), one synchronisation per
 * segment's worth instead of the ring's messages. The segment is the world's when the world is
 * shared memory (HVDS_HIER_SHM_WORLD), else the local group's (HVDS_HIER_LOCAL_ONLY: a Gloo
 * world whose ranks share the host). The negotiation's agreement meets there too when the
 * world is shared memory. */
#include <stdio.h>

#include "backend.h"
#include "hierarchy.h"
#include "shm_p2p.h"

static int every_rank_here(const hvds_runtime_t* rt) {
  return rt->hier_mode == HVDS_HIER_LOCAL_ONLY || rt->hier_mode == HVDS_HIER_SHM_WORLD;
}

static hvds_p2p_t* segment_of(const hvds_runtime_t* rt) {
  return rt->hier_mode == HVDS_HIER_SHM_WORLD ? rt->world : rt->local;
}

static int takes(const hvds_pset_t* s, const hvds_response_t* r, size_t bytes) {
  return s->id == 0 && r->type == HVDS_MSG_ALLREDUCE && every_rank_here(s->rt);
}

/* Puts the segment's failure into the set's communicator, where the coordinator reports it. */
static hvds_result_t failed(hvds_pset_t* s, hvds_p2p_t* seg, hvds_result_t rc) {
  if (seg != s->comm)
    snprintf(s->comm->error, sizeof s->comm->error, "shared memory segment: %.400s", seg->error);
  return rc;
}

static hvds_result_t allreduce(hvds_pset_t* s, void* buf, size_t count, hvds_dtype_t dtype,
                               hvds_reduce_op_t op, const hvds_coll_opts_t* o) {
  hvds_p2p_t* seg = segment_of(s->rt);
  hvds_result_t rc = hvds__shm_allreduce(seg, buf, count, dtype, op);
  return rc == HVDS_SUCCESS ? rc : failed(s, seg, rc);
}

static hvds_result_t allreduce_pieces(hvds_pset_t* s, const hvds_coll_piece_t* pieces, int n,
                                      hvds_dtype_t dtype, hvds_reduce_op_t op) {
  hvds_p2p_t* seg = segment_of(s->rt);
  hvds_result_t rc = hvds__shm_allreduce_pieces(seg, pieces, n, dtype, op);
  return rc == HVDS_SUCCESS ? rc : failed(s, seg, rc);
}

/* The words meet in the segment: one synchronisation instead of log2(P) rounds of messages (the
 * cycle's owner runs the segment's collectives in order). */
static int agrees(const hvds_pset_t* s) {
  return s->comm == s->rt->world && s->rt->hier_mode == HVDS_HIER_SHM_WORLD;
}

static hvds_result_t agree(hvds_pset_t* s, uint64_t* words, size_t n, hvds_reduce_op_t op) {
  return hvds__shm_agree(s->comm, words, n, HVDS_INT64, op);
}

const hvds_backend_t hvds__backend_shm_segment = {
    .name = "shm_segment",
    .takes = takes,
    .allreduce = allreduce,
    .allreduce_pieces = allreduce_pieces,
    .agrees = agrees,
    .agree = agree,
};
