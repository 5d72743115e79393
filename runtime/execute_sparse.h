/* Execution of sparse allreduces, called by execute.c. */
#ifndef HVDS_EXECUTE_SPARSE_H_
#define HVDS_EXECUTE_SPARSE_H_

#include "exec_shared.h"
#include "state.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sparse allreduce and sparse_detect allreduce. */
hvds_result_t hvds__exec_sparse_allreduce(hvds_pset_t* s, hvds_response_t* r, hvds_exec_t* x);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_EXECUTE_SPARSE_H_ */
