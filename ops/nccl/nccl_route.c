/* The NCCL route of the device library (device_api.h): contexts kept per GPU for the process,
 * communicators, the device fusion buffer, the submission every collective shares, and the
 * fused allreduce, over the backend of nccl_backend.h. */
#include "nccl_route.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "current_device.h"
#include "device_events.h"
#include "dtype.h"
#include "nccl_backend.h"
#include "nccl_route_internal.h"
#include "result_text.h"

enum { kMaxDevices = 64 };

static pthread_mutex_t contexts_mu = PTHREAD_MUTEX_INITIALIZER;
static device_state_t devices[kMaxDevices];

void hvds__route_say(char* why, size_t why_len, const char* fmt, const char* detail) {
  if (why != NULL && why_len > 0) snprintf(why, why_len, fmt, detail);
}

void* hvds__route_context(int device, int timeout_ms, char* why, size_t why_len) {
  if (device < 0 || device >= kMaxDevices) {
    hvds__route_say(why, why_len, "%s", "GPU index outside 0..63");
    return NULL;
  }
  int previous = hvds__current_device();
  pthread_mutex_lock(&contexts_mu);
  device_state_t* d = &devices[device];
  if (d->ctx == NULL) {
    hvds_result_t rc = hvds__nccl_ctx_create(device, timeout_ms, &d->ctx);
    if (rc != HVDS_SUCCESS)
      hvds__route_say(why, why_len,
                      "creating the GPU's stream and completion "
                      "thread failed: %s",
                      hvds__result_text(rc));
    else
      pthread_mutex_init(&d->mu, NULL);
  }
  pthread_mutex_unlock(&contexts_mu);
  hvds__restore_device(previous);
  return d->ctx != NULL ? d : NULL;
}

/* The control plane's broadcast behind the backend's callback type. */
typedef struct {
  hvds_device_bcast_fn bcast;
  void* bctx;
} bcast_t;

static hvds_result_t bcast_through(void* arg, void* buf, size_t bytes, int root) {
  const bcast_t* b = arg;
  return b->bcast(b->bctx, buf, bytes, root) == 0 ? HVDS_SUCCESS : HVDS_REMOTE_ERROR;
}

void* hvds__route_comm_create(void* context, int rank, int size, hvds_device_bcast_fn bcast,
                              void* bctx, char* why, size_t why_len) {
  device_state_t* d = context;
  route_comm_t* c = calloc(1, sizeof(*c));
  if (c == NULL) {
    hvds__route_say(why, why_len, "%s", "out of memory");
    return NULL;
  }
  bcast_t b = {bcast, bctx};
  int previous = hvds__current_device();
  hvds_result_t rc = hvds__nccl_comm_create(d->ctx, rank, size, bcast_through, &b, &c->comm);
  hvds__restore_device(previous);
  if (rc != HVDS_SUCCESS) {
    hvds__route_say(why, why_len,
                    "creating the NCCL communicator failed: %s (the log has NCCL's reason)",
                    hvds__result_text(rc));
    free(c);
    return NULL;
  }
  c->device = d;
  return c;
}

void* hvds__route_comm_pair(void* local, void* cross, char* why, size_t why_len) {
  route_comm_t *l = local, *x = cross;
  route_comm_t* c = calloc(1, sizeof(*c));
  if (c == NULL || l->device != x->device) {
    hvds__route_say(why, why_len, "%s",
                    c == NULL ? "out of memory" : "the two communicators are on different GPUs");
    free(c);
    return NULL;
  }
  *c = (route_comm_t){l->comm, l->device, x->comm, {l, x}};
  return c;
}

void hvds__route_comm_destroy(void* comm) {
  route_comm_t* c = comm;
  if (c == NULL) return;
  if (c->cross != NULL) {  // a pair: its parts
    hvds__route_comm_destroy(c->parts[0]);
    hvds__route_comm_destroy(c->parts[1]);
  } else {
    hvds__nccl_comm_destroy(c->comm);
  }
  free(c);
}

void* hvds__route_fusion(device_state_t* d, size_t bytes, char* why, size_t why_len) {
  pthread_mutex_lock(&d->mu);
  if (d->fusion_bytes < bytes) {
    hvds__nccl_ctx_sync(d->ctx);
    cudaFree(d->fusion);
    d->fusion = NULL;
    d->fusion_bytes = 0;
    cudaError_t e = cudaSetDevice(hvds__nccl_ctx_device(d->ctx));
    if (e == cudaSuccess) e = cudaMalloc(&d->fusion, bytes);
    if (e != cudaSuccess) {
      hvds__route_say(why, why_len, "allocating the GPU fusion buffer failed: %s",
                      cudaGetErrorString(e));
      d->fusion = NULL;
      (void)cudaGetLastError();
    } else {
      d->fusion_bytes = bytes;
    }
  }
  void* p = d->fusion;
  pthread_mutex_unlock(&d->mu);
  return p;
}

/* The caller's completion behind the backend's callback type. */
typedef struct {
  hvds_device_done_fn done;
  void* arg;
} completion_t;

static void complete(void* arg, hvds_result_t status, const char* message) {
  completion_t c = *(completion_t*)arg;
  free(arg);
  c.done(c.arg, (int)status, message);
}

/* An allreduce's own arguments. */
typedef struct {
  const void* const* inputs;
  void* const* outputs;
  const size_t* counts;
  int n;
  hvds_dtype_t dtype;
  hvds_reduce_op_t op;
  double prescale, postscale;
} allreduce_args_t;

/* One tensor in place of the caller's memory, several through the fusion buffer; a pair's
 * always through it, hierarchically. */
static hvds_result_t launch_allreduce(route_comm_t* c, void* args, const hvds_nccl_call_t* call,
                                      char* why, size_t why_len) {
  const allreduce_args_t* a = args;
  if (a->n == 1 && a->inputs[0] != NULL && c->cross == NULL)
    return hvds__nccl_allreduce(c->comm, a->inputs[0], a->outputs[0], a->counts[0], a->dtype, a->op,
                                a->prescale, a->postscale, call);
  size_t total = 0, L = c->cross != NULL ? (size_t)hvds__nccl_comm_size(c->comm) : 1;
  for (int i = 0; i < a->n; i++) total += a->counts[i];
  total = (total + L - 1) / L * L;  // the hierarchical allreduce's blocks, padded
  void* fusion = hvds__route_fusion(c->device, total * hvds__dtype_bytes(a->dtype), why, why_len);
  hvds_cuda_buf_t stack_in[64], stack_out[64];
  hvds_cuda_buf_t* in = a->n <= 64 ? stack_in : malloc((size_t)a->n * sizeof(*in));
  hvds_cuda_buf_t* out = a->n <= 64 ? stack_out : malloc((size_t)a->n * sizeof(*out));
  hvds_result_t rc = HVDS_SYSTEM_ERROR;
  if (fusion != NULL && in != NULL && out != NULL) {
    for (int i = 0; i < a->n; i++) {
      in[i] = (hvds_cuda_buf_t){(void*)a->inputs[i], a->counts[i]};
      out[i] = (hvds_cuda_buf_t){a->outputs[i], a->counts[i]};
    }
    rc = c->cross != NULL
             ? hvds__nccl_allreduce_hierarchical(c->comm, c->cross, in, out, a->n, fusion, a->dtype,
                                                 a->op, a->prescale, a->postscale, call)
             : hvds__nccl_allreduce_fused(c->comm, in, out, a->n, fusion, a->dtype, a->op,
                                          a->prescale, a->postscale, call);
  } else if (fusion != NULL) {
    hvds__route_say(why, why_len, "%s", "out of memory");
  }
  if (in != stack_in) free(in);
  if (out != stack_out) free(out);
  return rc;
}

int hvds__route_submit(route_comm_t* c, void* const* ready, int nready, hvds_device_done_fn done,
                       void* done_arg, hvds_route_launch_fn launch, void* args, char* why,
                       size_t why_len) {
  if (why != NULL && why_len > 0) why[0] = '\0';
  completion_t* completion = malloc(sizeof(*completion));
  void* stack_events[64];
  void** events = nready <= 64 ? stack_events : malloc((size_t)nready * sizeof(void*));
  hvds_result_t rc = HVDS_SYSTEM_ERROR;
  if (completion != NULL && events != NULL) {
    *completion = (completion_t){done, done_arg};
    for (int i = 0; i < nready; i++) events[i] = hvds__device_event_handle(ready[i]);
    hvds_nccl_call_t call = {events, nready, complete, completion};
    int previous = hvds__current_device();
    rc = launch(c, args, &call, why, why_len);
    hvds__restore_device(previous);
  }
  if (events != stack_events) free(events);  // the stream took the events' states
  if (rc == HVDS_SUCCESS) return 0;
  free(completion);  // nothing was enqueued: done will not be called
  const char* err = hvds__nccl_comm_error(c->comm);
  if (why != NULL && why_len > 0 && why[0] == '\0')
    hvds__route_say(why, why_len, "%s", err[0] ? err : hvds__result_text(rc));
  return -1;
}

int hvds__route_allreduce(void* comm, const void* const* inputs, void* const* outputs,
                          const size_t* counts, int n, int dtype, int op, double prescale,
                          double postscale, void* const* ready, int nready,
                          hvds_device_done_fn done, void* done_arg, char* why, size_t why_len) {
  allreduce_args_t a = {inputs,   outputs,  counts, n, (hvds_dtype_t)dtype, (hvds_reduce_op_t)op,
                        prescale, postscale};
  return hvds__route_submit(comm, ready, nready, done, done_arg, launch_allreduce, &a, why,
                            why_len);
}

void* hvds__route_launch_event(void* comm, char* why, size_t why_len) {
  const device_state_t* d = ((route_comm_t*)comm)->device;
  int64_t stream = (int64_t)(intptr_t)hvds__nccl_ctx_stream(d->ctx);
  return hvds__route_ready_event(hvds__nccl_ctx_device(d->ctx), stream, why, why_len);
}
