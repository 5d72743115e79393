/* HVDS_CUDA_CHECK, the check macro (runtime/base/check.h) for code that calls the CUDA runtime
 * (cuda/ and ops/nccl/). Include this instead of check.h: it defines the macro, then includes
 * check.h for the others. A failed call is logged with CUDA's message, the CUDA
 * error state is reset (cudaGetLastError), and the function returns HVDS_SYSTEM_ERROR. */
#ifndef HVDS_CUDA_CHECK_H_
#define HVDS_CUDA_CHECK_H_

#include <cuda_runtime_api.h>

#include "log.h"

#define HVDS_CUDA_CHECK(call)                                             \
  do {                                                                    \
    cudaError_t hvds_cu_rc_ = (call);                                     \
    if (hvds_cu_rc_ != cudaSuccess) {                                     \
      (void)cudaGetLastError();                                           \
      HVDS_WARN("%s failed: %s", #call, cudaGetErrorString(hvds_cu_rc_)); \
      return HVDS_SYSTEM_ERROR;                                           \
    }                                                                     \
  } while (0)

#include "check.h"

#endif /* HVDS_CUDA_CHECK_H_ */
