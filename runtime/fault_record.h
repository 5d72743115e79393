/* A communication failure explained once, for every rank's error message. */
#ifndef HVDS_FAULT_RECORD_H_
#define HVDS_FAULT_RECORD_H_

#include "state.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Builds rt->fatal once, from this rank's view of a communication failure plus the root cause
 * other ranks and the launcher reported through the store. */
void hvds__record_fault(hvds_pset_t* s, hvds_result_t rc);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_FAULT_RECORD_H_ */
