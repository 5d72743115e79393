/* Execution of negotiated responses: pack, run the algorithm over the set's communicator,
 * unpack, scale, complete the handles. The cycle's owner only: the coordinator, or a caller that
 * runs the cycle while it waits (cycle.h). */
#ifndef HVDS_EXECUTE_H_
#define HVDS_EXECUTE_H_

#include "state.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Runs r on set s. Per-tensor failures (validation errors, allocation) complete the handles and
 * return HVDS_SUCCESS; a communication failure returns its code (the runtime cannot continue). */
hvds_result_t hvds__execute(hvds_pset_t* s, hvds_response_t* r);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_EXECUTE_H_ */
