/* Waiting on a handle: the caller runs due cycles itself, then sleeps on the table. */
#ifndef HVDS_HANDLE_WAIT_H_
#define HVDS_HANDLE_WAIT_H_

#include "state.h"

#ifdef __cplusplus
extern "C" {
#endif

/* hvds_wait() (hvdsparse.h) on a given runtime. */
hvds_result_t hvds__wait(hvds_runtime_t* rt, hvds_handle_t id, int32_t timeout_ms);
/* Whether this thread's latest hvds_wait() found its operation pending and finished it by
 * running cycles itself; the next enqueue from this thread reads and clears it. */
extern __thread int hvds__served_itself; /* __thread: the one spelling C and C++ share */

#ifdef __cplusplus
}
#endif
#endif /* HVDS_HANDLE_WAIT_H_ */
