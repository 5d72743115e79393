/* The host hierarchy at init: worker binding, shared memory among the ranks of a host, and how
 * the global set's allreduce runs (rt->hier_mode), which the shared-segment and hierarchical
 * backends read. See docs/hierarchy.md. */
#ifndef HVDS_HIERARCHY_H_
#define HVDS_HIERARCHY_H_

#include <stddef.h>

#include "state.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How the global set's allreduce runs (rt->hier_mode). */
typedef enum {
  HVDS_HIER_FLAT = 0,       /* on the set's communicator */
  HVDS_HIER_ALWAYS = 1,     /* hierarchical (HIERARCHICAL_ALLREDUCE=1) */
  HVDS_HIER_AUTO = 2,       /* hierarchical when the cost model says it is cheaper */
  HVDS_HIER_LOCAL_ONLY = 3, /* every rank on this host, Gloo world: rt->local's shared segment */
  HVDS_HIER_SHM_WORLD = 4   /* every rank on this host, shared-memory world: its segment */
} hvds_hier_mode_t;

/* At init, after the local and cross groups exist (bootstrap): binds this worker when
 * BIND_TO asks; replaces rt->local by the shared-memory transport when every rank of this
 * host can attach (SHM=1, the default), and makes it the world when every rank is on this
 * host (unless TRANSPORT=gloo); decides rt->hier_mode and, for AUTO, measures the local and
 * cross links (rt->hier_cost, identical on every rank). Collective over the world. On failure
 * records the message with hvds__set_error; a transport that cannot attach is not a failure
 * (the ranks keep TCP). */
hvds_result_t hvds__hier_setup(hvds_runtime_t* rt, const char* host);

/* Estimated seconds of a flat and of a hierarchical allreduce of bytes (from rt->hier_cost). */
double hvds__hier_cost_flat(hvds_runtime_t* rt, size_t bytes);
double hvds__hier_cost_hier(hvds_runtime_t* rt, size_t bytes);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_HIERARCHY_H_ */
