/* The NCCL route's choice and its enqueue side (device_route.h); the execution side is the
 * device backend (backend/device.c). */
#include "device_route.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "device_library.h"
#include "param.h"

hvds_gpu_ops_t hvds__gpu_operations(void) {
  const char* mode = hvds__param_str(HVDS_PARAM_GPU_OPERATIONS);
  /* Horovod's HOROVOD_GPU_OPERATIONS is its build's choice (NCCL, MPI), often left set in its
   * images: it selects nothing here. */
  const char* horovod = getenv("HOROVOD_GPU_OPERATIONS");
  if (getenv("HVDSPARSE_GPU_OPERATIONS") == NULL && horovod != NULL && mode != NULL &&
      strcmp(mode, horovod) == 0)
    return HVDS_GPU_OPS_HOST;
  if (mode == NULL || strcasecmp(mode, "auto") == 0 || strcasecmp(mode, "host") == 0)
    return HVDS_GPU_OPS_HOST;
  if (strcasecmp(mode, "nccl") == 0) return HVDS_GPU_OPS_NCCL;
  return HVDS_GPU_OPS_INVALID;
}

int hvds__device_routed(int32_t type, hvds_reduce_op_t op, hvds_dtype_t dtype) {
  int kind = type == HVDS_MSG_ALLREDUCE || type == HVDS_MSG_ALLGATHER ||
             type == HVDS_MSG_REDUCESCATTER || type == HVDS_MSG_BROADCAST ||
             type == HVDS_MSG_ALLTOALL;
  // NCCL reduces no 16-bit integers and no Adasum
  int reduces = type == HVDS_MSG_ALLREDUCE || type == HVDS_MSG_REDUCESCATTER;
  return hvds__gpu_operations() == HVDS_GPU_OPS_NCCL && kind &&
         !(reduces && (op == HVDS_ADASUM || dtype == HVDS_INT16 || dtype == HVDS_UINT16));
}

hvds_result_t hvds__device_route_enqueue(hvds_entry_t* e, int64_t stream, int rank,
                                         const char* what) {
  char why[512] = "";
  const hvds_device_api_t* api = hvds__device_library(NULL, 0, NULL, 0);  // checked at enqueue
  e->ready_event = api->ready_event(e->input.device, stream, why, sizeof(why));
  if (e->ready_event == NULL)
    return hvds__set_error(HVDS_SYSTEM_ERROR, "%s '%s' on rank %d: GPU %d: %s", what, e->name, rank,
                           e->input.device, why);
  return HVDS_SUCCESS;
}

void hvds__device_event_free(void* event) {
  const hvds_device_api_t* api = hvds__device_library(NULL, 0, NULL, 0);
  if (event != NULL && api != NULL) api->event_free(event);
}

void hvds__device_comm_free(hvds_pset_t* s) {
  const hvds_device_api_t* api = hvds__device_library(NULL, 0, NULL, 0);
  if (s->device_comm != NULL && api != NULL) api->comm_destroy(s->device_comm);
  s->device_comm = NULL;
  if (s->id == 0 && s->rt->device_hier_comm != NULL && api != NULL)  // the global set's too
    api->comm_destroy(s->rt->device_hier_comm);
  if (s->id == 0) s->rt->device_hier_comm = NULL;
}

void hvds__device_comms_free(hvds_runtime_t* rt) {
  for (int32_t id = 0; id < HVDS_MAX_PROCESS_SETS; id++)
    if (rt->psets[id] != NULL) hvds__device_comm_free(rt->psets[id]);
}
