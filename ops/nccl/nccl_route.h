/* The NCCL route's entries of the device library's table (device_api.h versions 3 to 7). */
#ifndef HVDS_OPS_NCCL_NCCL_ROUTE_H_
#define HVDS_OPS_NCCL_NCCL_ROUTE_H_

#include <stddef.h>
#include <stdint.h>

#include "device_api.h"

#ifdef __cplusplus
extern "C" {
#endif

void* hvds__route_context(int device, int timeout_ms, char* why, size_t why_len);
void* hvds__route_comm_create(void* context, int rank, int size, hvds_device_bcast_fn bcast,
                              void* bctx, char* why, size_t why_len);
void hvds__route_comm_destroy(void* comm);
void* hvds__route_comm_pair(void* local, void* cross, char* why, size_t why_len);
int hvds__route_allreduce(void* comm, const void* const* inputs, void* const* outputs,
                          const size_t* counts, int n, int dtype, int op, double prescale,
                          double postscale, void* const* ready, int nready,
                          hvds_device_done_fn done, void* done_arg, char* why, size_t why_len);

int hvds__route_allgather(void* comm, const void* input, void* output, const size_t* bytes,
                          void* const* ready, int nready, hvds_device_done_fn done, void* done_arg,
                          char* why, size_t why_len);
int hvds__route_reducescatter(void* comm, const void* input, void* output, const size_t* counts,
                              int dtype, int op, double prescale, double postscale,
                              void* const* ready, int nready, hvds_device_done_fn done,
                              void* done_arg, char* why, size_t why_len);

int hvds__route_broadcast(void* comm, void* buf, size_t bytes, int root, void* const* ready,
                          int nready, hvds_device_done_fn done, void* done_arg, char* why,
                          size_t why_len);
int hvds__route_alltoall(void* comm, const void* input, const size_t* send_bytes, void* output,
                         const size_t* recv_bytes, void* const* ready, int nready,
                         hvds_device_done_fn done, void* done_arg, char* why, size_t why_len);
void* hvds__route_launch_event(void* comm, char* why, size_t why_len);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_OPS_NCCL_NCCL_ROUTE_H_ */
