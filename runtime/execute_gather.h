/* Execution of allgather, broadcast, alltoall and reducescatter, called by execute.c. */
#ifndef HVDS_EXECUTE_GATHER_H_
#define HVDS_EXECUTE_GATHER_H_

#include "exec_shared.h"
#include "state.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The collectives whose output size comes from negotiation, and broadcast. */
hvds_result_t hvds__exec_allgather(hvds_pset_t* s, hvds_response_t* r, hvds_exec_t* x);
hvds_result_t hvds__exec_broadcast(hvds_pset_t* s, hvds_response_t* r, hvds_exec_t* x);
hvds_result_t hvds__exec_alltoall(hvds_pset_t* s, hvds_response_t* r, hvds_exec_t* x);
hvds_result_t hvds__exec_reducescatter(hvds_pset_t* s, hvds_response_t* r, hvds_exec_t* x);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_EXECUTE_GATHER_H_ */
