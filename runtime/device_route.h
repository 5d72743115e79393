/* GPU tensors run by the device library's NCCL route (HVDSPARSE_GPU_OPERATIONS=nccl,
 * docs/gpu.md): allreduce, allgather, broadcast, alltoall and reducescatter; sparse and Adasum
 * operations and 16-bit integer reductions are staged through host memory (device_staging.h).
 * At enqueue the producer's stream gets a ready event (here); at execution the device backend
 * (backend/device.c) launches the operation on the GPU's own stream, which waits for those
 * events, and the entries complete from the library's completion thread. */
#ifndef HVDS_RUNTIME_DEVICE_ROUTE_H_
#define HVDS_RUNTIME_DEVICE_ROUTE_H_

#include <stdint.h>

#include "state.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What HVDSPARSE_GPU_OPERATIONS asks for. */
typedef enum {
  HVDS_GPU_OPS_HOST = 0,
  HVDS_GPU_OPS_NCCL = 1,
  HVDS_GPU_OPS_INVALID = 2
} hvds_gpu_ops_t;
hvds_gpu_ops_t hvds__gpu_operations(void);

/* Whether GPU tensors of operation type with op and dtype go through the route rather than
 * staging (NCCL has no 16-bit integers: those are staged). The knob must be the same on every
 * rank, as it decides which collective runs. */
int hvds__device_routed(int32_t type, hvds_reduce_op_t op, hvds_dtype_t dtype);

/* At enqueue, for a routed entry (hvds__check_gpu_entry passed): records its ready event on
 * stream. rank and what name a
 * failure (recorded with hvds_last_error). */
hvds_result_t hvds__device_route_enqueue(hvds_entry_t* e, int64_t stream, int rank,
                                         const char* what);

/* Frees an entry's ready event; the set's communicator (the global set's: the hierarchical
 * pair too), after its operations completed. */
void hvds__device_event_free(void* event);
void hvds__device_comm_free(hvds_pset_t* s);
/* Every set's communicator, before the sets go: their completions take the queue lock, so
 * this runs without it. */
void hvds__device_comms_free(hvds_runtime_t* rt);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_RUNTIME_DEVICE_ROUTE_H_ */
