/* What the NCCL route's files share (nccl_route.c: contexts, communicators, allreduce;
 * device_gather.c: allgather and reducescatter; device_exchange.c: broadcast and alltoall). */
#ifndef HVDS_OPS_NCCL_NCCL_ROUTE_INTERNAL_H_
#define HVDS_OPS_NCCL_NCCL_ROUTE_INTERNAL_H_

#include <pthread.h>
#include <stddef.h>

#include "device_api.h"
#include "nccl_backend.h"

/* One GPU's context and its fusion buffer, grown only when an operation needs more. */
typedef struct {
  hvds_nccl_ctx_t* ctx;
  void* fusion;
  size_t fusion_bytes;
  pthread_mutex_t mu; /* the fusion buffer's growth */
} device_state_t;

/* A communicator and the GPU it runs on; or a pair (comm_pair): comm the host's ranks, cross
 * the other hosts', both owned. */
typedef struct route_comm {
  hvds_nccl_comm_t* comm;
  device_state_t* device;
  hvds_nccl_comm_t* cross;     /* a pair's; NULL for one communicator */
  struct route_comm* parts[2]; /* a pair's local and cross, freed with it */
} route_comm_t;

/* why gets fmt with detail (a "%s"), when there is room. */
void hvds__route_say(char* why, size_t why_len, const char* fmt, const char* detail);

/* The device's fusion buffer of at least bytes; growing waits for the work using the old one.
 * NULL with why. */
void* hvds__route_fusion(device_state_t* d, size_t bytes, char* why, size_t why_len);

/* Launches one operation on c's stream: args are the operation's own. */
typedef hvds_result_t (*hvds_route_launch_fn)(route_comm_t* c, void* args,
                                              const hvds_nccl_call_t* call, char* why,
                                              size_t why_len);

/* Runs launch with a call that waits for the ready events and ends in done(done_arg, ...), on
 * the right GPU, the caller's current GPU put back: 0, or -1 with why (done never called). */
int hvds__route_submit(route_comm_t* c, void* const* ready, int nready, hvds_device_done_fn done,
                       void* done_arg, hvds_route_launch_fn launch, void* args, char* why,
                       size_t why_len);

#endif /* HVDS_OPS_NCCL_NCCL_ROUTE_INTERNAL_H_ */
