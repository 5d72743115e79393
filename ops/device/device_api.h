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
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HVDS_DEVICE_API_VERSION 2
#define HVDS_DEVICE_API_SYMBOL "hvds_device_api"
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

  /* Version 2: staging device tensors through host memory (HVDSPARSE_GPU_OPERATIONS=host).
   * Each call that can fail returns 0, or -1 with the CUDA runtime's reason in why. */
  /* bytes of page-locked host memory, or NULL. */
  void* (*host_alloc)(size_t bytes, char* why, size_t why_len);
  void (*host_free)(void* host);
  /* Copies bytes of GPU device's memory to host once the work queued so far on stream (a
   * cudaStream_t as an integer; 0 the default stream) is done; returns when the copy is. */
  int (*copy_to_host)(void* host, const void* device_memory, size_t bytes, int device,
                      int64_t stream, char* why, size_t why_len);
  /* Copies bytes of host memory to GPU device's memory in stream's order; returns when done,
   * so that the host memory may be reused and later work on stream sees the bytes. */
  int (*copy_to_device)(void* device_memory, const void* host, size_t bytes, int device,
                        int64_t stream, char* why, size_t why_len);
} hvds_device_api_t;

typedef const hvds_device_api_t* (*hvds_device_api_fn)(void);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_OPS_DEVICE_API_H_ */
