/* A runtime's state apart from how its world was connected: the knobs it reads at init, its
 * process sets, and a runtime opened over a world communicator the caller already has. The
 * process's runtime (the C API's) is set up by hvds_init over the launcher's world; tests open
 * several in one process, ranks as threads over the in-process transport, and drive their
 * negotiation directly or through a coordinator thread each. */
#ifndef HVDS_INSTANCE_H_
#define HVDS_INSTANCE_H_

#include "p2p.h"
#include "state.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reads the knobs into rt's fields (at every init: the environment may have changed). */
void hvds__instance_configure(hvds_runtime_t* rt);
/* Records a binding's preferred coordinator priority (hvds_prefer_coordinator_priority) for
 * this and later inits; 1 when the running coordinator must change (rt->coord_priority_pending
 * set), 0 when the environment's setting or the same mode stands. */
int hvds__instance_prefer_priority(hvds_runtime_t* rt, int mode);
/* Installs the global set, then n static sets: set i has sizes[i] ranks, listed one set after
 * the other in ranks. On failure records the message and returns the code. */
hvds_result_t hvds__instance_install_sets(hvds_runtime_t* rt, const int32_t* ranks,
                                          const int32_t* sizes, int32_t n);
/* Destroys every set (accepts a runtime with none). */
void hvds__instance_destroy_sets(hvds_runtime_t* rt);

/* Opens rt as rank world->rank of world->size ranks over world, every rank its own host, with
 * no store and no coordinator thread: the caller runs cycles (hvds__cycle_run) or starts the
 * thread (hvds__instance_start). rt's previous contents are overwritten; the caller keeps
 * world and destroys it after hvds__instance_close. */
hvds_result_t hvds__instance_open(hvds_runtime_t* rt, hvds_p2p_t* world);
/* Starts rt's coordinator thread. */
hvds_result_t hvds__instance_start(hvds_runtime_t* rt);
/* Asks every rank to stop and joins rt's coordinator thread; every rank of the world must call
 * it (the stop is agreed in a cycle). Does nothing when the thread was not started. */
void hvds__instance_stop(hvds_runtime_t* rt);
/* Stops rt if started, then frees its sets, handles and buffers and its locks. */
void hvds__instance_close(hvds_runtime_t* rt);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_INSTANCE_H_ */
