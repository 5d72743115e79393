/* Process sets: subsets of ranks with their own negotiation, cache and communicator. Set 0 is
 * every rank. */
#ifndef HVDS_PROCESS_SET_H_
#define HVDS_PROCESS_SET_H_

#include "exec_shared.h"
#include "state.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Tag spaces of the sub-communicators over the world communicator. */
#define HVDS_SPACE_LOCAL 1
#define HVDS_SPACE_CROSS 2
#define HVDS_SPACE_PSET_BASE 16

/* The tag of the set's next operation (tags.h): the same on every member. Cycle owner. */
uint64_t hvds__next_tag(hvds_pset_t* s);
/* Creates set id over ranks (copied, sorted) and installs it in rt->psets. For id 0, comm is the
 * world communicator. Returns NULL when out of memory or the communicator cannot be built. */
hvds_pset_t* hvds__pset_create(hvds_runtime_t* rt, int32_t id, const int32_t* ranks, int32_t n);
/* Frees a set; its queue must be empty. Accepts NULL. */
void hvds__pset_destroy(hvds_pset_t* s);
/* Executes a negotiated registration or removal of a set (the responses of
 * hvds_add_process_set and hvds_remove_process_set). */
hvds_result_t hvds__exec_ps_add(hvds_pset_t* s, hvds_response_t* r, hvds_exec_t* x);
hvds_result_t hvds__exec_ps_remove(hvds_pset_t* s, hvds_response_t* r, hvds_exec_t* x);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_PROCESS_SET_H_ */
