/* What the runtime says about GPU tensors and GPU builds, from the device library
 * (ops/device), loaded on first use. */
#ifndef HVDS_RUNTIME_DEVICE_SUPPORT_H_
#define HVDS_RUNTIME_DEVICE_SUPPORT_H_

#include "hvdsparse.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The error for a tensor the API was given on a GPU: what (e.g. "tensor", "sparse allreduce"),
 * the tensor's name and device, and why this installation cannot run it. */
hvds_result_t hvds__refuse_device_tensor(const char* what, const char* name, int device);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_RUNTIME_DEVICE_SUPPORT_H_ */
