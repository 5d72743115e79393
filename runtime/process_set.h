/* Process sets: subsets of ranks with their own negotiation, cache and communicator. Set 0 is
 * every rank. */
#ifndef HVDS_PROCESS_SET_H_
#define HVDS_PROCESS_SET_H_

#include "state.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Tag spaces of the sub-communicators over the world communicator. */
#define HVDS_SPACE_LOCAL 1
#define HVDS_SPACE_CROSS 2
#define HVDS_SPACE_PSET_BASE 16

/* Creates set id over ranks (copied, sorted) and installs it in rt.psets. For id 0, comm is the
 * world communicator. Returns NULL when out of memory or the communicator cannot be built. */
hvds_pset_t* hvds__pset_create(int32_t id, const int32_t* ranks, int32_t n);
/* Frees a set; its queue must be empty. Accepts NULL. */
void hvds__pset_destroy(hvds_pset_t* s);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_PROCESS_SET_H_ */
