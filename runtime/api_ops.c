/* Enqueue side of the public API: validate on the caller's thread, build entries, hand them to
 * the coordinator through the process set's queue. Never blocks on communication. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device_route.h"
#include "device_staging.h"
#include "device_support.h"
#include "dtype.h"
#include "enqueue.h"
#include "exec_shared.h"
#include "handle.h"
#include "handle_wait.h"
#include "log.h"
#include "sparse_rt.h"
#include "state.h"

/* Elements of t, or SIZE_MAX when its rank is outside 0..HVDS_MAX_DIMS, a dimension is negative,
 * or the tensor would hold more than PTRDIFF_MAX bytes (no object that large exists, and the
 * products below would overflow). The dtype must be valid. */
static size_t tensor_elements(const hvds_tensor_t* t) {
  if (t->ndim < 0 || t->ndim > HVDS_MAX_DIMS) return SIZE_MAX;
  size_t n = 1, limit = (size_t)PTRDIFF_MAX / hvds__dtype_bytes(t->dtype);
  for (int32_t d = 0; d < t->ndim; d++) {
    if (t->shape[d] < 0) return SIZE_MAX;
    if (t->shape[d] > 0 && n > limit / (size_t)t->shape[d]) return SIZE_MAX;
    n *= (size_t)t->shape[d];
  }
  return n;
}

static hvds_result_t check_tensor(const hvds_tensor_t* t, const char* name) {
  if (t == NULL) return hvds__set_error(HVDS_INVALID_ARGUMENT, "tensor '%s' is NULL", name);
  if ((int)t->dtype < 0 || t->dtype >= HVDS_DTYPE_COUNT)
    return hvds__set_error(HVDS_INVALID_ARGUMENT, "tensor '%s': unsupported dtype %d", name,
                           (int)t->dtype);
  if (t->ndim < 0 || t->ndim > HVDS_MAX_DIMS)
    return hvds__set_error(HVDS_INVALID_ARGUMENT, "tensor '%s': rank %d outside 0..%d", name,
                           t->ndim, HVDS_MAX_DIMS);
  for (int32_t d = 0; d < t->ndim; d++)
    if (t->shape[d] < 0)
      return hvds__set_error(HVDS_INVALID_ARGUMENT, "tensor '%s': negative dimension %lld", name,
                             (long long)t->shape[d]);
  size_t n = tensor_elements(t);
  if (n == SIZE_MAX)
    return hvds__set_error(HVDS_INVALID_ARGUMENT,
                           "tensor '%s': %d dimensions whose product exceeds the largest possible "
                           "object (%lld bytes)", name, t->ndim, (long long)PTRDIFF_MAX);
  if (n > 0 && t->data == NULL)
    return hvds__set_error(HVDS_INVALID_ARGUMENT, "tensor '%s': data is NULL", name);
  if (t->device < -1)
    return hvds__set_error(HVDS_INVALID_ARGUMENT,
                           "tensor '%s': device %d is neither the CPU "
                           "(-1) nor a GPU (0 and up)",
                           name, t->device);
  return HVDS_SUCCESS;
}

/* A broadcast's root must be a rank of its set: refused here, since the collective would fail
 * on every rank at once and stop the runtime. */
static hvds_result_t check_root(hvds_runtime_t* rt, int32_t type, const hvds_op_options_t* o,
                                const char* what) {
  if (type != HVDS_MSG_BROADCAST) return HVDS_SUCCESS;
  pthread_mutex_lock(&rt->qmu);
  int32_t n = rt->psets[o->process_set]->n;  // hvds__enqueue_ready found the set
  pthread_mutex_unlock(&rt->qmu);
  if (o->root_rank >= 0 && o->root_rank < n) return HVDS_SUCCESS;
  return hvds__set_error(HVDS_INVALID_ARGUMENT, "%s '%s': root rank %d is not a rank of the process "
                         "set (0..%d)", what, o->name, o->root_rank, n - 1);
}

/* Alltoall's splits must give every rank of the set a non-negative row count adding up to the
 * input's first dimension (read as the rows sent); without splits that dimension must divide
 * evenly. Refused here: the runtime would read past the input otherwise. */
static hvds_result_t check_splits(hvds_runtime_t* rt, const hvds_op_options_t* o,
                                  const hvds_tensor_t* t, const char* what) {
  pthread_mutex_lock(&rt->qmu);
  int32_t n = rt->psets[o->process_set]->n;  // hvds__enqueue_ready found the set
  pthread_mutex_unlock(&rt->qmu);
  if (t->ndim < 1)
    return hvds__set_error(HVDS_INVALID_ARGUMENT, "%s '%s': a scalar has no rows to split", what,
                           o->name);
  int64_t rows = t->shape[0], sum = 0;
  if (o->splits == NULL || o->nsplits == 0) {
    if (rows % n == 0) return HVDS_SUCCESS;
    return hvds__set_error(HVDS_INVALID_ARGUMENT, "%s '%s': %lld rows do not divide among %d "
                           "ranks; give splits", what, o->name, (long long)rows, n);
  }
  if (o->nsplits != n)
    return hvds__set_error(HVDS_INVALID_ARGUMENT, "%s '%s': %d splits for a set of %d ranks",
                           what, o->name, o->nsplits, n);
  for (int32_t k = 0; k < n; k++) {
    if (o->splits[k] < 0)
      return hvds__set_error(HVDS_INVALID_ARGUMENT, "%s '%s': split %d is negative (%d)", what,
                             o->name, k, o->splits[k]);
    sum += o->splits[k];
  }
  if (sum == rows) return HVDS_SUCCESS;
  return hvds__set_error(HVDS_INVALID_ARGUMENT, "%s '%s': splits add up to %lld rows, the tensor "
                         "has %lld", what, o->name, (long long)sum, (long long)rows);
}

hvds_result_t hvds__enqueue(hvds_runtime_t* rt, int32_t type, const char* what, int32_t n,
                            const hvds_tensor_t* inputs, hvds_tensor_t* outputs,
                            const hvds_op_options_t* o, hvds_handle_t* handle) {
  if (o == NULL || o->name == NULL || handle == NULL || n <= 0 || inputs == NULL)
    return hvds__set_error(HVDS_INVALID_ARGUMENT, "%s: options, name, inputs and handle are required", what);
  hvds_result_t rc = hvds__enqueue_ready(rt, o->process_set, what);
  if (rc != HVDS_SUCCESS) return rc;
  if (o->op == HVDS_ADASUM && type != HVDS_MSG_ALLREDUCE)
    return hvds__set_error(HVDS_NOT_SUPPORTED, "%s '%s': Adasum applies to allreduce only", what,
                           o->name);
  if (o->op == HVDS_ADASUM) {
    for (int32_t i = 0; i < n; i++) {
      hvds_dtype_t dt = inputs[i].dtype;
      if (dt != HVDS_FLOAT16 && dt != HVDS_BFLOAT16 && dt != HVDS_FLOAT32 && dt != HVDS_FLOAT64)
        return hvds__set_error(HVDS_INVALID_ARGUMENT,
                               "%s '%s': Adasum reduces float16, bfloat16, float32 and float64 "
                               "tensors, not %s",
                               what, o->name, hvds__dtype_name(dt));
    }
  }
  if ((int)o->op < 0 || o->op > HVDS_PRODUCT)
    return hvds__set_error(HVDS_INVALID_ARGUMENT, "%s '%s': unknown reduce op %d", what, o->name,
                           (int)o->op);
  rc = check_root(rt, type, o, what);
  if (rc != HVDS_SUCCESS) return rc;
  int ordered = OPT_HAS(o, ordered) && o->ordered;
  if (ordered && type != HVDS_MSG_ALLREDUCE && type != HVDS_MSG_REDUCESCATTER &&
      type != HVDS_MSG_ALLGATHER)
    return hvds__set_error(HVDS_INVALID_ARGUMENT, "%s '%s': the ordered lane takes allreduce, "
                           "reducescatter and allgather only", what, o->name);
  hvds_entry_t* stack[16];
  hvds_entry_t** es = n <= 16 ? stack : calloc((size_t)n, sizeof(*es));
  if (es == NULL) return hvds__set_error(HVDS_SYSTEM_ERROR, "out of memory");
  int32_t made = 0;
  char name[1024];
  size_t len = strlen(o->name);
  for (; made < n; made++) {
    if (n > 1) {
      snprintf(name, sizeof(name), "%s_%dof%d", o->name, made + 1, n);
    } else { /* the common case, without a format on the hot path */
      if (len >= sizeof(name)) len = sizeof(name) - 1;
      memcpy(name, o->name, len);
      name[len] = '\0';
    }
    rc = check_tensor(&inputs[made], name);
    if (rc == HVDS_SUCCESS && outputs) rc = check_tensor(&outputs[made], name);
    if (rc != HVDS_SUCCESS) break;
    es[made] = hvds__enqueue_entry_new(name, type, o);
    if (es[made] == NULL) {
      rc = hvds__set_error(HVDS_SYSTEM_ERROR, "out of memory");
      break;
    }
    es[made]->input = inputs[made];
    es[made]->output = outputs ? outputs[made] : inputs[made];
    es[made]->ordered = ordered;
    int64_t stream = OPT_HAS(o, stream) ? o->stream : 0;
    if (inputs[made].device >= 0 &&
        ((rc = hvds__check_gpu_entry(es[made], what)) != HVDS_SUCCESS ||
         (rc = hvds__device_routed(type, o->op, inputs[made].dtype)
                   ? hvds__device_route_enqueue(es[made], stream, rt->rank, what)
                   : hvds__stage_entry(es[made], stream, rt->rank, what)) != HVDS_SUCCESS)) {
      made++; /* freed below */
      break;
    }
    if (type == HVDS_MSG_ALLREDUCE && !ordered &&
        (rc = hvds__sparse_detect_entry(rt, es[made], o)) != HVDS_SUCCESS) {
      made++; /* freed below */
      break;
    }
  }
  if (rc == HVDS_SUCCESS && type == HVDS_MSG_ALLTOALL) rc = check_splits(rt, o, &inputs[0], what);
  for (int32_t i = 0; rc == HVDS_SUCCESS && type == HVDS_MSG_REDUCESCATTER && i < n; i++)
    if (inputs[i].ndim < 1)
      rc = hvds__set_error(HVDS_INVALID_ARGUMENT, "%s '%s': a scalar has no rows to scatter",
                           what, o->name);
  if (rc == HVDS_SUCCESS && type == HVDS_MSG_ALLTOALL && o->splits && o->nsplits > 0) {
    es[0]->splits = malloc((size_t)o->nsplits * sizeof(int32_t));
    if (es[0]->splits == NULL) rc = hvds__set_error(HVDS_SYSTEM_ERROR, "out of memory");
    else {
      memcpy(es[0]->splits, o->splits, (size_t)o->nsplits * sizeof(int32_t));
      es[0]->nsplits = o->nsplits;
    }
  }
  if (rc == HVDS_SUCCESS) {
    rc = hvds__enqueue_submit_all(rt, es, n, handle);
    made = rc == HVDS_SUCCESS ? 0 : n; /* queued entries belong to the coordinator now */
  }
  if (rc != HVDS_SUCCESS)
    for (int32_t i = 0; i < made; i++) hvds__entry_free(es[i]);
  if (es != stack) free(es);
  return rc;
}

hvds_result_t hvds_allreduce_async(const hvds_tensor_t* input, hvds_tensor_t* output,
                                   const hvds_op_options_t* opts, hvds_handle_t* handle) {
  hvds_runtime_t* rt = &hvds__rt;
  // A tensor that check_tensor will refuse (bad rank, dtype or size) is left to it.
  if (input && output && (unsigned)input->dtype < HVDS_DTYPE_COUNT &&
      (unsigned)output->dtype < HVDS_DTYPE_COUNT && tensor_elements(input) != SIZE_MAX &&
      tensor_elements(output) != SIZE_MAX) {
    if (tensor_elements(input) != tensor_elements(output) || input->dtype != output->dtype)
      return hvds__set_error(HVDS_INVALID_ARGUMENT,
                             "allreduce '%s': output must have the input's size and dtype",
                             opts && opts->name ? opts->name : "?");
  }
  return hvds__enqueue(rt, HVDS_MSG_ALLREDUCE, "Allreduce", 1, input, output, opts, handle);
}

hvds_result_t hvds_grouped_allreduce_async(int32_t n, const hvds_tensor_t* inputs,
                                           hvds_tensor_t* outputs, const hvds_op_options_t* opts,
                                           hvds_handle_t* handle) {
  hvds_runtime_t* rt = &hvds__rt;
  return hvds__enqueue(rt, HVDS_MSG_ALLREDUCE, "Allreduce", n, inputs, outputs, opts, handle);
}

hvds_result_t hvds_allgather_async(const hvds_tensor_t* input, const hvds_op_options_t* opts,
                                   hvds_handle_t* handle) {
  hvds_runtime_t* rt = &hvds__rt;
  return hvds__enqueue(rt, HVDS_MSG_ALLGATHER, "Allgather", 1, input, NULL, opts, handle);
}

hvds_result_t hvds_broadcast_async(hvds_tensor_t* tensor, const hvds_op_options_t* opts,
                                   hvds_handle_t* handle) {
  hvds_runtime_t* rt = &hvds__rt;
  return hvds__enqueue(rt, HVDS_MSG_BROADCAST, "Broadcast", 1, tensor, tensor, opts, handle);
}

hvds_result_t hvds_alltoall_async(const hvds_tensor_t* input, const hvds_op_options_t* opts,
                                  hvds_handle_t* handle) {
  hvds_runtime_t* rt = &hvds__rt;
  return hvds__enqueue(rt, HVDS_MSG_ALLTOALL, "Alltoall", 1, input, NULL, opts, handle);
}

hvds_result_t hvds_reducescatter_async(const hvds_tensor_t* input, const hvds_op_options_t* opts,
                                       hvds_handle_t* handle) {
  hvds_runtime_t* rt = &hvds__rt;
  return hvds__enqueue(rt, HVDS_MSG_REDUCESCATTER, "Reducescatter", 1, input, NULL, opts, handle);
}

hvds_result_t hvds_grouped_reducescatter_async(int32_t n, const hvds_tensor_t* inputs,
                                               const hvds_op_options_t* opts,
                                               hvds_handle_t* handle) {
  hvds_runtime_t* rt = &hvds__rt;
  return hvds__enqueue(rt, HVDS_MSG_REDUCESCATTER, "Reducescatter", n, inputs, NULL, opts, handle);
}

hvds_result_t hvds__enqueue_control(hvds_runtime_t* rt, int32_t type, const char* what,
                                    const char* name, int32_t ps, int32_t root,
                                    hvds_handle_t* handle) {
  hvds_result_t rc = hvds__enqueue_ready(rt, ps, what);
  if (rc != HVDS_SUCCESS) return rc;
  hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
  o.process_set = ps;
  hvds_entry_t* e = hvds__enqueue_entry_new(name, type, &o);
  if (e == NULL) return hvds__set_error(HVDS_SYSTEM_ERROR, "out of memory");
  e->input.dtype = HVDS_UINT8;
  e->input.device = -1;
  e->output = e->input;
  e->root_rank = root;
  rc = hvds__enqueue_submit_all(rt, &e, 1, handle);
  if (rc != HVDS_SUCCESS) hvds__entry_free(e);
  return rc;
}

hvds_result_t hvds_barrier_async(int32_t process_set, hvds_handle_t* handle) {
  hvds_runtime_t* rt = &hvds__rt;
  return hvds__enqueue_control(rt, HVDS_MSG_BARRIER, "Barrier", "barrier.noname", process_set, 0,
                               handle);
}

hvds_result_t hvds_join_async(hvds_handle_t* handle) {
  hvds_runtime_t* rt = &hvds__rt;
  return hvds__enqueue_control(rt, HVDS_MSG_JOIN, "Join", "join.noname", 0, 0, handle);
}

/* Process-set changes are negotiated like collectives on the global set, so every rank applies
 * them at the same point of the same cycle. */

hvds_result_t hvds_add_process_set(const int32_t* ranks, int32_t n, int32_t* id) {
  hvds_runtime_t* rt = &hvds__rt;
  if (ranks == NULL || n <= 0 || id == NULL)
    return hvds__set_error(HVDS_INVALID_ARGUMENT, "add_process_set: ranks are required");
  for (int32_t i = 0; i < n; i++)
    if (ranks[i] < 0 || (rt->size > 0 && ranks[i] >= rt->size))
      return hvds__set_error(HVDS_INVALID_ARGUMENT, "add_process_set: rank %d outside 0..%d",
                             ranks[i], rt->size - 1);
  char name[64];
  snprintf(name, sizeof(name), "process_set.add.%d", atomic_fetch_add(&rt->ps_change_seq, 1));
  hvds_entry_t* e = NULL;
  hvds_handle_t h;
  hvds_result_t rc = hvds__enqueue_ready(rt, 0, "add_process_set");
  if (rc != HVDS_SUCCESS) return rc;
  int32_t* copy = malloc((size_t)n * sizeof(int32_t));
  if (copy == NULL) return hvds__set_error(HVDS_SYSTEM_ERROR, "out of memory");
  memcpy(copy, ranks, (size_t)n * sizeof(int32_t));
  hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
  e = hvds__enqueue_entry_new(name, HVDS_MSG_PS_ADD, &o);
  if (e == NULL) {
    free(copy);
    return hvds__set_error(HVDS_SYSTEM_ERROR, "out of memory");
  }
  e->input.dtype = HVDS_UINT8;
  e->input.device = -1;
  e->ps_ranks = copy;
  e->ps_nranks = n;
  rc = hvds__enqueue_submit_all(rt, &e, 1, &h);
  if (rc != HVDS_SUCCESS) {
    hvds__entry_free(e);
    return rc;
  }
  rc = hvds__wait(rt, h, -1);
  if (rc == HVDS_SUCCESS) {
    pthread_mutex_lock(&rt->hmu);
    hvds_handle_rec_t* r = hvds__handle_find_locked(rt, h);
    *id = r ? r->result_int : -1;
    pthread_mutex_unlock(&rt->hmu);
  } else {
    hvds__set_error(rc, "%s", hvds_handle_error(h));
  }
  hvds__release(rt, h);
  return rc;
}

hvds_result_t hvds_remove_process_set(int32_t id) {
  hvds_runtime_t* rt = &hvds__rt;
  if (id <= 0 || id >= HVDS_MAX_PROCESS_SETS)
    return hvds__set_error(HVDS_INVALID_ARGUMENT, "remove_process_set: cannot remove set %d", id);
  char name[64];
  snprintf(name, sizeof(name), "process_set.remove.%d.%d", id,
           atomic_fetch_add(&rt->ps_change_seq, 1));
  hvds_handle_t h;
  /* The set id travels in the root rank field. */
  hvds_result_t rc =
      hvds__enqueue_control(rt, HVDS_MSG_PS_REMOVE, "remove_process_set", name, 0, id, &h);
  if (rc != HVDS_SUCCESS) return rc;
  rc = hvds__wait(rt, h, -1);
  if (rc != HVDS_SUCCESS) hvds__set_error(rc, "%s", hvds_handle_error(h));
  hvds__release(rt, h);
  return rc;
}
