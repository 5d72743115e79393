/* Execution of negotiated responses: pack, run the algorithm over the set's communicator,
 * unpack, scale, complete the handles. The cycle's owner only: the coordinator, or a caller that
 * runs the cycle while it waits (cycle.h). */
#ifndef HVDS_EXECUTE_H_
#define HVDS_EXECUTE_H_

#include "exec_shared.h"
#include "state.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Runs r on set s. Per-tensor failures (validation errors, allocation) complete the handles and
 * return HVDS_SUCCESS; a communication failure returns its code (the runtime cannot continue). */
hvds_result_t hvds__execute(hvds_pset_t* s, hvds_response_t* r);

/* The collectives whose output size comes from negotiation, and broadcast (execute_gather.c). */
hvds_result_t hvds__exec_allgather(hvds_pset_t* s, hvds_response_t* r, hvds_exec_t* x);
hvds_result_t hvds__exec_broadcast(hvds_pset_t* s, hvds_response_t* r, hvds_exec_t* x);
hvds_result_t hvds__exec_alltoall(hvds_pset_t* s, hvds_response_t* r, hvds_exec_t* x);
hvds_result_t hvds__exec_reducescatter(hvds_pset_t* s, hvds_response_t* r, hvds_exec_t* x);
/* Sparse allreduce and sparse_detect allreduce (execute_sparse.c). */
hvds_result_t hvds__exec_sparse_allreduce(hvds_pset_t* s, hvds_response_t* r, hvds_exec_t* x);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_EXECUTE_H_ */
