/* GPU support as this installation has it: the device library's presence decides
 * hvds_cuda_built/hvds_nccl_built and what a GPU tensor is told. */
#include "device_support.h"

#include "device_library.h"
#include "device_route.h"
#include "state.h"

int hvds_cuda_built(void) { return hvds__device_library(NULL, 0, NULL, 0) != NULL; }

int hvds_nccl_built(void) {
  const hvds_device_api_t* api = hvds__device_library(NULL, 0, NULL, 0);
  return api != NULL ? api->nccl_version() : 0;
}

int hvds_gpu_operations_routed(void) {
  return hvds__gpu_operations() == HVDS_GPU_OPS_NCCL && hvds_cuda_built();
}

hvds_result_t hvds__refuse_device_tensor(const char* what, const char* name, int device) {
  char why[512], path[256];
  const hvds_device_api_t* api = hvds__device_library(why, sizeof(why), path, sizeof(path));
  if (api == NULL)
    return hvds__set_error(HVDS_NOT_SUPPORTED,
                           "%s '%s' is on device %d, but this installation has no GPU support "
                           "(%s); move the tensor to the CPU",
                           what, name, device, why);
  int v = api->nccl_version();
  return hvds__set_error(HVDS_NOT_SUPPORTED,
                         "%s '%s' is on device %d: the device library (%s, NCCL %d.%d.%d) is "
                         "installed, but %s of GPU tensors is not supported in this version; "
                         "move the tensor to the CPU",
                         what, name, device, path, v / 10000, v / 100 % 100, v % 100, what);
}
