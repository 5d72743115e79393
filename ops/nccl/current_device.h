/* The device library's entries may run on a framework's own thread (a caller that runs the
 * runtime's cycle while it waits): each puts that thread's current GPU back as it found it. */
#ifndef HVDS_OPS_NCCL_CURRENT_DEVICE_H_
#define HVDS_OPS_NCCL_CURRENT_DEVICE_H_

#include <cuda_runtime_api.h>

/* The calling thread's current GPU, for hvds__restore_device; -1 when CUDA cannot say. */
static inline int hvds__current_device(void) {
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return device;
}

static inline void hvds__restore_device(int device) {
  if (device >= 0) cudaSetDevice(device);
}

#endif /* HVDS_OPS_NCCL_CURRENT_DEVICE_H_ */
