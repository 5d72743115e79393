/* Staging GPU tensors through pinned host memory (device_staging.h). */
#include "device_staging.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device_library.h"
#include "device_route.h"
#include "device_support.h"
#include "dtype.h"
#include "log.h"
#include "param.h"
#include "pinned_pool.h"

struct hvds_staging {
  const hvds_device_api_t* api;
  int device;     /* the GPU of the caller's tensors */
  int64_t stream; /* the producer's stream; the result is ordered on it too */
  void* in_host;  /* the input's host copy */
  void* copied;   /* the copy in's completion event until waited for, or NULL */
  size_t in_bytes;
  void* out_host;      /* allreduce out of place: the result's host memory; else NULL */
  void* device_out;    /* allreduce and broadcast: the caller's GPU memory for the result */
  hvds_alloc_fn alloc; /* allgather, alltoall, reducescatter: the caller's GPU allocator */
  void* alloc_ctx;
};

static size_t tensor_bytes(const hvds_tensor_t* t) {
  size_t n = hvds__dtype_bytes(t->dtype);
  for (int32_t d = 0; d < t->ndim; d++) n *= (size_t)t->shape[d];
  return n;
}

/* Says once, on rank 0, how GPU tensors travel. */
static void announce(int rank) {
  static atomic_int said;
  if (rank != 0 || atomic_exchange(&said, 1)) return;
  const char* mode = hvds__param_str(HVDS_PARAM_GPU_OPERATIONS);
  if (hvds__gpu_operations() == HVDS_GPU_OPS_NCCL)
    HVDS_INFO(
        "GPU_OPERATIONS=%s: GPU allreduce, allgather, broadcast, alltoall and reducescatter "
        "run by NCCL; sparse and Adasum operations and 16-bit integer reductions are staged "
        "through page-locked host memory",
        mode);
  else
    HVDS_INFO(
        "GPU tensors are staged through page-locked host memory "
        "(HVDSPARSE_GPU_OPERATIONS=%s)",
        mode ? mode : "auto");
}

static int is_gathered(int32_t type) {
  return type == HVDS_MSG_ALLGATHER || type == HVDS_MSG_ALLTOALL || type == HVDS_MSG_REDUCESCATTER;
}

hvds_result_t hvds__check_gpu_entry(const hvds_entry_t* e, const char* what) {
  if (hvds__gpu_operations() == HVDS_GPU_OPS_INVALID)
    return hvds__set_error(HVDS_INVALID_ARGUMENT,
                           "GPU_OPERATIONS=%s is not one of host, nccl, auto (tensor '%s')",
                           hvds__param_str(HVDS_PARAM_GPU_OPERATIONS), e->name);
  if (hvds__device_library(NULL, 0, NULL, 0) == NULL)
    return hvds__refuse_device_tensor("tensor", e->name, e->input.device);
  if (e->output.device != e->input.device)
    return hvds__set_error(HVDS_INVALID_ARGUMENT,
                           "%s '%s': the input is on device %d but the output on device %d", what,
                           e->name, e->input.device, e->output.device);
  if (is_gathered(e->type) && e->alloc == NULL)
    return hvds__set_error(HVDS_INVALID_ARGUMENT,
                           "%s '%s' of a GPU tensor needs an allocator (options alloc) for its "
                           "output on the GPU",
                           what, e->name);
  return HVDS_SUCCESS;
}

hvds_result_t hvds__stage_entry(hvds_entry_t* e, int64_t stream, int rank, const char* what) {
  const hvds_device_api_t* api = hvds__device_library(NULL, 0, NULL, 0);
  announce(rank);
  struct hvds_staging* st = calloc(1, sizeof(*st));
  if (st == NULL) return hvds__set_error(HVDS_SYSTEM_ERROR, "out of memory staging '%s'", e->name);
  st->api = api;
  st->device = e->input.device;
  st->stream = stream;
  st->in_bytes = tensor_bytes(&e->input);
  e->staging = st;  // freed with e from here on
  char why[512] = "";
  st->in_host = hvds__pinned_get(api, st->in_bytes, why, sizeof(why));
  if (st->in_host == NULL)
    return hvds__set_error(HVDS_SYSTEM_ERROR,
                           "%s '%s' on rank %d: no page-locked host memory for %zu bytes to stage "
                           "the tensor from GPU %d (%s)",
                           what, e->name, rank, st->in_bytes, st->device, why);
  if (api->copy_to_host_async(st->in_host, e->input.data, st->in_bytes, st->device, stream,
                              &st->copied, why, sizeof(why)) != 0)
    return hvds__set_error(HVDS_SYSTEM_ERROR,
                           "%s '%s' on rank %d: copying the tensor from GPU %d to host memory "
                           "failed (%s)",
                           what, e->name, rank, st->device, why);
  if (is_gathered(e->type)) {
    st->alloc = e->alloc;  // asked for the GPU output at the end; the runtime's is on the host
    st->alloc_ctx = e->alloc_ctx;
    e->alloc = NULL;
  } else if (e->type == HVDS_MSG_ALLREDUCE || e->type == HVDS_MSG_BROADCAST) {
    st->device_out = e->output.data;
    if (e->output.data != e->input.data) {
      st->out_host = hvds__pinned_get(api, st->in_bytes, why, sizeof(why));
      if (st->out_host == NULL)
        return hvds__set_error(HVDS_SYSTEM_ERROR,
                               "%s '%s' on rank %d: no page-locked host memory for the result "
                               "(%s)",
                               what, e->name, rank, why);
    }
  }
  e->input.data = st->in_host;
  e->output.data = st->out_host != NULL ? st->out_host : st->in_host;
  return HVDS_SUCCESS;
}

/* The result of a gathering operation, now in runtime-owned host memory, moved to GPU memory
 * from the caller's allocator. */
static hvds_result_t unstage_gathered(hvds_entry_t* e, struct hvds_staging* st, int rank,
                                      char* message, size_t message_len) {
  hvds_handle_rec_t* h = e->handle;
  hvds_tensor_t* t = &h->outputs[e->index];
  size_t bytes = tensor_bytes(t);
  void* device_out = st->alloc(st->alloc_ctx, t->dtype, t->ndim, t->shape, bytes);
  if (device_out == NULL) {
    snprintf(message, message_len,
             "'%s' on rank %d: the allocator gave no GPU memory for the "
             "%zu-byte result",
             e->name, rank, bytes);
    return HVDS_SYSTEM_ERROR;
  }
  char why[512] = "";
  if (bytes > 0 && st->api->copy_to_device(device_out, t->data, bytes, st->device, st->stream, why,
                                           sizeof(why)) != 0) {
    snprintf(message, message_len, "'%s' on rank %d: copying the result to GPU %d failed (%s)",
             e->name, rank, st->device, why);
    return HVDS_SYSTEM_ERROR;
  }
  if (h->owned[e->index] == t->data) {
    free(h->owned[e->index]);
    h->owned[e->index] = NULL;
  }
  t->data = device_out;
  t->device = st->device;
  return HVDS_SUCCESS;
}

hvds_result_t hvds__unstage_entry(hvds_entry_t* e, hvds_result_t status, int rank, char* message,
                                  size_t message_len) {
  struct hvds_staging* st = e->staging;
  if (status != HVDS_SUCCESS || st == NULL) return status;
  if (st->alloc != NULL) return unstage_gathered(e, st, rank, message, message_len);
  if (st->device_out == NULL) return status;
  char why[512] = "";
  if (st->api->copy_to_device(st->device_out, e->output.data, st->in_bytes, st->device, st->stream,
                              why, sizeof(why)) != 0) {
    snprintf(message, message_len, "'%s' on rank %d: copying the result to GPU %d failed (%s)",
             e->name, rank, st->device, why);
    return HVDS_SYSTEM_ERROR;
  }
  return status;
}

hvds_result_t hvds__staging_wait(hvds_entry_t* e, int rank, char* message, size_t message_len) {
  struct hvds_staging* st = e->staging;
  if (st == NULL || st->copied == NULL) return HVDS_SUCCESS;
  char why[512] = "";
  int rc = st->api->event_wait(st->copied, why, sizeof(why));
  st->api->event_free(st->copied);
  st->copied = NULL;
  if (rc == 0) return HVDS_SUCCESS;
  snprintf(message, message_len,
           "'%s' on rank %d: copying the tensor from GPU %d to host memory "
           "failed (%s)",
           e->name, rank, st->device, why);
  return HVDS_SYSTEM_ERROR;
}

void hvds__staging_free(struct hvds_staging* st) {
  if (st == NULL) return;
  if (st->copied != NULL) {  // the copy must land before its buffer goes back to the pool
    char why[512];
    st->api->event_wait(st->copied, why, sizeof(why));
    st->api->event_free(st->copied);
  }
  hvds__pinned_put(st->api, st->in_host, st->in_bytes);
  hvds__pinned_put(st->api, st->out_host, st->in_bytes);
  free(st);
}
