/* The host hierarchy: shared memory among the ranks of a host, worker binding, and the
 * hierarchical allreduce (local reduce-scatter, cross-host allreduce of this rank's shard,
 * local all-gather). See docs/hierarchy.md. */
#ifndef HVDS_HIERARCHY_H_
#define HVDS_HIERARCHY_H_

#include <stddef.h>

#include "collectives.h"
#include "shm_p2p.h"
#include "state.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How the global set's allreduce runs (rt.hier_mode). */
typedef enum {
  HVDS_HIER_FLAT = 0,       /* on the set's communicator */
  HVDS_HIER_ALWAYS = 1,     /* hierarchical (HIERARCHICAL_ALLREDUCE=1) */
  HVDS_HIER_AUTO = 2,       /* hierarchical when the cost model says it is cheaper */
  HVDS_HIER_LOCAL_ONLY = 3, /* every rank on this host, Gloo world: rt.local's shared segment */
  HVDS_HIER_SHM_WORLD = 4   /* every rank on this host, shared-memory world: its segment */
} hvds_hier_mode_t;

/* At init, after the local and cross groups exist (bootstrap): binds this worker when
 * BIND_TO asks; replaces rt.local by the shared-memory transport when every rank of this
 * host can attach (SHM=1, the default), and makes it the world when every rank is on this
 * host (unless TRANSPORT=gloo); decides rt.hier_mode and, for AUTO, measures the local and
 * cross links (rt.hier_cost, identical on every rank). Collective over the world. On failure
 * records the message with hvds__set_error; a transport that cannot attach is not a failure
 * (the ranks keep TCP). */
hvds_result_t hvds__hier_setup(const char* host);

/* Estimated seconds of a flat and of a hierarchical allreduce of bytes (from rt.hier_cost). */
double hvds__hier_cost_flat(size_t bytes);
double hvds__hier_cost_hier(size_t bytes);

/* Whether the allreduce of bytes on set s goes through hvds__hier_allreduce. The answer
 * depends only on data every rank shares, so every rank answers the same. */
int hvds__hier_wanted(const hvds_pset_t* s, size_t bytes);

/* In-place allreduce of count elements of buf on the global set, hierarchically (or through
 * the shared segment alone in LOCAL_ONLY and SHM_WORLD modes). o->tag is the set's tag for this
 * operation. On failure s->comm->error says which phase failed and why. Coordinator thread. */
hvds_result_t hvds__hier_allreduce(hvds_pset_t* s, void* buf, size_t count, hvds_dtype_t dtype,
                                   hvds_reduce_op_t op, const hvds_coll_opts_t* o);

/* 1 when the global set's allreduces go straight through one shared segment (every rank on
 * this host): then a fused allreduce can skip the fusion buffer (hvds__hier_allreduce_pieces). */
int hvds__hier_segment_only(const hvds_pset_t* s);

/* The fused allreduce of the pieces' concatenation through the segment, each tensor copied
 * from its input into the segment and from the segment to its output (hvds__shm_allreduce_pieces).
 * Only when hvds__hier_segment_only(s). */
hvds_result_t hvds__hier_allreduce_pieces(hvds_pset_t* s, const hvds_shm_piece_t* pieces, int n,
                                          hvds_dtype_t dtype, hvds_reduce_op_t op);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_HIERARCHY_H_ */
