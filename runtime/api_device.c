/* The public GPU functions that act on the process's runtime (hvdsparse.h): waiting for a
 * device, a routed operation's GPU work and making a consumer's stream wait for it. */
#include "device_completion.h"
#include "device_library.h"
#include "device_route.h"
#include "state.h"

hvds_result_t hvds_device_synchronize(int32_t device) {
  char why[512] = "";
  if (device < 0) return HVDS_SUCCESS;  // the CPU: nothing in flight
  const hvds_device_api_t* api = hvds__device_library(why, sizeof(why), NULL, 0);
  if (api == NULL)
    return hvds__set_error(HVDS_NOT_SUPPORTED, "hvds_device_synchronize: no device library: %s",
                           why);
  if (api->synchronize(device, why, sizeof(why)) != 0)
    return hvds__set_error(HVDS_SYSTEM_ERROR, "rank %d: waiting for GPU %d failed: %s",
                           hvds__rt.rank, (int)device, why);
  return HVDS_SUCCESS;
}

int32_t hvds_handle_gpu_work(hvds_handle_t handle) {
  return hvds__handle_gpu_work(&hvds__rt, handle);
}

hvds_result_t hvds_handle_stream_wait(hvds_handle_t handle, int64_t stream) {
  return hvds__handle_stream_wait(&hvds__rt, handle, stream);
}
