/* The NCCL route's allgather and reducescatter (device_api.h version 5): the collectives of
 * DeAR's buckets, submitted like the allreduce (nccl_route_internal.h). */
#include <cuda_runtime_api.h>
#include <string.h>

#include "dtype.h"
#include "nccl_route.h"
#include "nccl_route_internal.h"

typedef struct {
  const void* input;
  void* output;
  const size_t* bytes;
} allgather_args_t;

static hvds_result_t launch_allgather(route_comm_t* c, void* args, const hvds_nccl_call_t* call,
                                      char* why, size_t why_len) {
  const allgather_args_t* a = args;
  void* out = a->output;
  if (out == NULL) {  // no output: the rank still takes part, into scratch
    size_t total = 0;
    for (int r = 0; r < hvds__nccl_comm_size(c->comm); r++) total += a->bytes[r];
    out = hvds__route_fusion(c->device, total, why, why_len);
    if (out == NULL) return HVDS_SYSTEM_ERROR;
  }
  return hvds__nccl_allgather(c->comm, a->input, out, a->bytes, call);
}

int hvds__route_allgather(void* comm, const void* input, void* output, const size_t* bytes,
                          void* const* ready, int nready, hvds_device_done_fn done, void* done_arg,
                          char* why, size_t why_len) {
  allgather_args_t a = {input, output, bytes};
  return hvds__route_submit(comm, ready, nready, done, done_arg, launch_allgather, &a, why,
                            why_len);
}

typedef struct {
  const void* input;
  void* output;
  const size_t* counts;
  hvds_dtype_t dtype;
  hvds_reduce_op_t op;
  double prescale, postscale;
} reducescatter_args_t;

/* The backend scales its buffer in place: the caller's input goes through the fusion buffer
 * when there is a prescale, copied on the stream once the ready events completed. */
static hvds_result_t launch_reducescatter(route_comm_t* c, void* args, const hvds_nccl_call_t* call,
                                          char* why, size_t why_len) {
  const reducescatter_args_t* a = args;
  int n = hvds__nccl_comm_size(c->comm), me = hvds__nccl_comm_rank(c->comm);
  size_t esz = hvds__dtype_bytes(a->dtype), total = 0, mine_off = 0;
  for (int r = 0; r < n; r++) {
    if (r < me) mine_off += a->counts[r];
    total += a->counts[r];
  }
  void* buf = (void*)a->input;
  hvds_nccl_call_t after = *call;
  if (a->prescale != 1.0 || a->output == NULL) {
    buf = hvds__route_fusion(c->device, total * esz, why, why_len);
    if (buf == NULL) return HVDS_SYSTEM_ERROR;
    cudaStream_t s = (cudaStream_t)hvds__nccl_ctx_stream(c->device->ctx);
    cudaError_t e = cudaSetDevice(hvds__nccl_ctx_device(c->device->ctx));
    for (int i = 0; e == cudaSuccess && i < call->nready; i++)
      e = cudaStreamWaitEvent(s, (cudaEvent_t)call->ready_events[i], 0);
    if (e == cudaSuccess)
      e = cudaMemcpyAsync(buf, a->input, total * esz, cudaMemcpyDeviceToDevice, s);
    if (e != cudaSuccess) {
      hvds__route_say(why, why_len, "copying the input to the fusion buffer: %s",
                      cudaGetErrorString(e));
      (void)cudaGetLastError();
      return HVDS_SYSTEM_ERROR;
    }
    after.ready_events = NULL;  // the copy waited for them
    after.nready = 0;
  }
  void* out = a->output != NULL ? a->output : (char*)buf + mine_off * esz;
  return hvds__nccl_reducescatter(c->comm, buf, out, a->counts, a->dtype, a->op, a->prescale,
                                  a->postscale, &after);
}

int hvds__route_reducescatter(void* comm, const void* input, void* output, const size_t* counts,
                              int dtype, int op, double prescale, double postscale,
                              void* const* ready, int nready, hvds_device_done_fn done,
                              void* done_arg, char* why, size_t why_len) {
  reducescatter_args_t a = {input,    output,   counts, (hvds_dtype_t)dtype, (hvds_reduce_op_t)op,
                            prescale, postscale};
  return hvds__route_submit(comm, ready, nready, done, done_arg, launch_reducescatter, &a, why,
                            why_len);
}
