/* Compression.topk on the GPU: the device library's topk_feedback (device_api.h). */
#ifndef HVDS_OPS_NCCL_DEVICE_TOPK_H_
#define HVDS_OPS_NCCL_DEVICE_TOPK_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

int hvds__device_topk_feedback(int device, int64_t stream, void* acc, const void* grad, int dtype,
                               size_t n, size_t k, void* indices, int index_dtype, void* values,
                               char* why, size_t why_len);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_OPS_NCCL_DEVICE_TOPK_H_ */
