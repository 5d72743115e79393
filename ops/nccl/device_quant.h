/* The quantizer on the GPU: the device library's quant_encode and quant_decode (device_api.h). */
#ifndef HVDS_OPS_NCCL_DEVICE_QUANT_H_
#define HVDS_OPS_NCCL_DEVICE_QUANT_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

int hvds__device_quant_encode(int device, int64_t stream, const void* src, size_t n, int dtype,
                              int bits, uint64_t seed, void* dst, char* why, size_t why_len);
int hvds__device_quant_decode(int device, int64_t stream, const void* src, size_t n, int bits,
                              int dtype, void* dst, char* why, size_t why_len);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_OPS_NCCL_DEVICE_QUANT_H_ */
