/* The background coordinator thread. */
#ifndef HVDS_COORDINATOR_H_
#define HVDS_COORDINATOR_H_

#include "state.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Thread body: runs cycles until every rank agreed to stop or communication failed. */
void* hvds__coord_main(void* arg);
/* Fails every queued and pending entry with status and message (after the loop ended). */
void hvds__coord_fail_all(hvds_runtime_t* rt, hvds_result_t status, const char* message);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_COORDINATOR_H_ */
