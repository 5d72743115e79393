/* The device library's interface: what libhvdsparse_device.so (ops/nccl and cuda/, built only
 * where CUDA is) offers to the runtime and the launcher, which load it at run time so that they
 * never depend on CUDA or NCCL themselves (docs/gpu.md).
 *
 * The library exports one function, HVDS_DEVICE_API_SYMBOL, returning a table whose first field
 * is the interface's version; a loader refuses a table of another version.
 */
#ifndef HVDS_OPS_DEVICE_API_H_
#define HVDS_OPS_DEVICE_API_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HVDS_DEVICE_API_VERSION 1
#define HVDS_DEVICE_API_SYMBOL "hvds_device_api_v1"
#define HVDS_DEVICE_LIBRARY_NAME "libhvdsparse_device.so"
/* The oldest NCCL the backend uses (ncclGetLastError, ncclInProgress). */
#define HVDS_DEVICE_MIN_NCCL_VERSION 21400

typedef struct {
  int version; /* HVDS_DEVICE_API_VERSION */
  /* NCCL's version code of the libnccl this process resolved (e.g. 22809); 0 if unreadable. */
  int (*nccl_version)(void);
  /* The CUDA runtime's version (e.g. 12080); 0 if unreadable. */
  int (*cuda_runtime_version)(void);
  /* How many GPUs the CUDA runtime sees; 0 with the runtime's reason in why when none. */
  int (*device_count)(char* why, size_t why_len);
} hvds_device_api_t;

typedef const hvds_device_api_t* (*hvds_device_api_fn)(void);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_OPS_DEVICE_API_H_ */
