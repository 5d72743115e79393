/* The NCCL route's broadcast and alltoall (device_api.h version 6), submitted like the
 * allreduce (nccl_route_internal.h). */
#include <stdlib.h>

#include "nccl_route.h"
#include "nccl_route_internal.h"

typedef struct {
  void* buf;
  size_t bytes;
  int root;
} broadcast_args_t;

static hvds_result_t launch_broadcast(route_comm_t* c, void* args, const hvds_nccl_call_t* call,
                                      char* why, size_t why_len) {
  (void)why, (void)why_len;
  const broadcast_args_t* a = args;
  return hvds__nccl_broadcast(c->comm, a->buf, a->bytes, a->root, call);
}

int hvds__route_broadcast(void* comm, void* buf, size_t bytes, int root, void* const* ready,
                          int nready, hvds_device_done_fn done, void* done_arg, char* why,
                          size_t why_len) {
  broadcast_args_t a = {buf, bytes, root};
  return hvds__route_submit(comm, ready, nready, done, done_arg, launch_broadcast, &a, why,
                            why_len);
}

typedef struct {
  const void* input;
  const size_t* send_bytes;
  void* output;
  const size_t* recv_bytes;
} alltoall_args_t;

/* Blocks back to back: the offsets are the running sums of the sizes. */
static hvds_result_t launch_alltoall(route_comm_t* c, void* args, const hvds_nccl_call_t* call,
                                     char* why, size_t why_len) {
  const alltoall_args_t* a = args;
  int n = hvds__nccl_comm_size(c->comm);
  size_t* offsets = malloc(2 * (size_t)n * sizeof(size_t));
  if (offsets == NULL) {
    hvds__route_say(why, why_len, "%s", "out of memory");
    return HVDS_SYSTEM_ERROR;
  }
  size_t *soff = offsets, *roff = offsets + n, sent = 0, received = 0;
  for (int r = 0; r < n; r++) {
    soff[r] = sent;
    roff[r] = received;
    sent += a->send_bytes[r];
    received += a->recv_bytes[r];
  }
  void* out = a->output;
  if (out == NULL) out = hvds__route_fusion(c->device, received, why, why_len);
  hvds_result_t rc = out == NULL ? HVDS_SYSTEM_ERROR
                                 : hvds__nccl_alltoallv(c->comm, a->input, a->send_bytes, soff, out,
                                                        a->recv_bytes, roff, call);
  free(offsets);
  return rc;
}

int hvds__route_alltoall(void* comm, const void* input, const size_t* send_bytes, void* output,
                         const size_t* recv_bytes, void* const* ready, int nready,
                         hvds_device_done_fn done, void* done_arg, char* why, size_t why_len) {
  alltoall_args_t a = {input, send_bytes, output, recv_bytes};
  return hvds__route_submit(comm, ready, nready, done, done_arg, launch_alltoall, &a, why, why_len);
}
