/* The background coordinator thread. */
#ifndef HVDS_COORDINATOR_H_
#define HVDS_COORDINATOR_H_

#include "state.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Thread body: runs cycles until every rank agreed to stop or communication failed. */
void* hvds__coord_main(void* arg);
/* Builds rt.fatal once, from this rank's view of a communication failure plus the root cause
 * other ranks and the launcher reported through the store. */
void hvds__record_fault(hvds_pset_t* s, hvds_result_t rc);
/* Fails every queued and pending entry with status and message (after the loop ended). */
void hvds__coord_fail_all(hvds_result_t status, const char* message);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_COORDINATOR_H_ */
