/* The handle table: slots with generations, completion, release. The public functions over it
 * are api_handles.c; waiting is handle_wait.c. */
#include "handle.h"

#include <stdlib.h>
#include <string.h>

#include "device_route.h"
#include "sparse_rt.h"

static void record_free(hvds_handle_rec_t* h) {
  if (h == NULL) return;
  for (int32_t i = 0; i < h->n; i++) free(h->owned[i]);
  free(h->recv_splits); /* outputs and owned live in h's own allocation */
  free(h->message);
  hvds__sparse_out_free(h->sparse);
  hvds__device_event_free(h->gpu_work);
  free(h);
}

static int grow_locked(hvds_runtime_t* rt) {
  size_t cap = rt->handle_cap ? rt->handle_cap * 2 : 1024;
  hvds_handle_rec_t** hs = realloc(rt->handles, cap * sizeof(*hs));
  if (hs == NULL) return -1;
  rt->handles = hs;
  uint32_t* gen = realloc(rt->handle_gen, cap * sizeof(*gen));
  if (gen == NULL) return -1;
  rt->handle_gen = gen;
  size_t* fr = realloc(rt->free_slots, cap * sizeof(*fr));
  if (fr == NULL) return -1;
  rt->free_slots = fr;
  for (size_t i = rt->handle_cap; i < cap; i++) {
    rt->handles[i] = NULL;
    rt->handle_gen[i] = 1;
  }
  /* Push new slots so that the lowest is taken first. */
  for (size_t i = cap; i > rt->handle_cap; i--) rt->free_slots[rt->nfree++] = i - 1;
  rt->handle_cap = cap;
  return 0;
}

hvds_handle_rec_t* hvds__handle_create(hvds_runtime_t* rt, int32_t n) {
  /* One allocation: the record, then its outputs and owned arrays. */
  size_t slots = (size_t)(n > 0 ? n : 1);
  hvds_handle_rec_t* h = calloc(1, sizeof(*h) + slots * (sizeof(hvds_tensor_t) + sizeof(void*)));
  if (h == NULL) return NULL;
  h->n = n;
  h->remaining = n;
  h->join_rank = -1;
  h->result_int = -1;
  h->outputs = (hvds_tensor_t*)(h + 1);
  h->owned = (void**)(h->outputs + slots);
  pthread_mutex_lock(&rt->hmu);
  if (rt->nfree == 0 && grow_locked(rt) != 0) {
    pthread_mutex_unlock(&rt->hmu);
    record_free(h);
    return NULL;
  }
  size_t slot = rt->free_slots[--rt->nfree];
  rt->handles[slot] = h;
  h->id = ((hvds_handle_t)rt->handle_gen[slot] << 32) | (hvds_handle_t)(slot + 1);
  pthread_mutex_unlock(&rt->hmu);
  return h;
}

hvds_handle_rec_t* hvds__handle_find_locked(hvds_runtime_t* rt, hvds_handle_t id) {
  if (id <= 0) return NULL;
  size_t slot = (size_t)(id & 0xffffffff) - 1;
  uint32_t gen = (uint32_t)(id >> 32);
  if (slot >= rt->handle_cap || rt->handle_gen[slot] != gen) return NULL;
  return rt->handles[slot];
}

static void drop_slot_locked(hvds_runtime_t* rt, hvds_handle_rec_t* h) {
  size_t slot = (size_t)(h->id & 0xffffffff) - 1;
  rt->handles[slot] = NULL;
  rt->handle_gen[slot]++;
  rt->free_slots[rt->nfree++] = slot;
}

/* Marks one entry of h done; rt->hmu is held. Returns 1 when h became done. */
static int complete_locked(hvds_runtime_t* rt, hvds_handle_rec_t* h, hvds_result_t status,
                           const char* message) {
  if (status != HVDS_SUCCESS && h->status == HVDS_SUCCESS) {
    h->status = status;
    free(h->message);
    h->message = strdup(message ? message : hvds_result_str(status));
  }
  if (--h->remaining > 0) return 0;
  h->done = 1;
  rt->last_completion = hvds__now();
  if (h->released) {
    drop_slot_locked(rt, h);
    record_free(h);
  }
  return 1;
}

void hvds__handle_complete_many(hvds_runtime_t* rt, hvds_handle_rec_t** hs, int32_t n,
                                hvds_result_t status, const char* message) {
  int woke = 0;
  pthread_mutex_lock(&rt->hmu);
  for (int32_t i = 0; i < n; i++)
    if (hs[i]) woke |= complete_locked(rt, hs[i], status, message);
  if (woke) pthread_cond_broadcast(&rt->hcv);
  pthread_mutex_unlock(&rt->hmu);
}

void hvds__handle_complete(hvds_runtime_t* rt, hvds_handle_rec_t* h, hvds_result_t status,
                           const char* message) {
  pthread_mutex_lock(&rt->hmu);
  if (status != HVDS_SUCCESS && h->status == HVDS_SUCCESS) {
    h->status = status;
    free(h->message);
    h->message = strdup(message ? message : hvds_result_str(status));
  }
  if (--h->remaining <= 0) {
    h->done = 1;
    rt->last_completion = hvds__now();
    if (h->released) {
      drop_slot_locked(rt, h);
      record_free(h);
    }
    pthread_cond_broadcast(&rt->hcv);
  }
  pthread_mutex_unlock(&rt->hmu);
}

void hvds__handle_table_free(hvds_runtime_t* rt) {
  pthread_mutex_lock(&rt->hmu);
  for (size_t i = 0; i < rt->handle_cap; i++) record_free(rt->handles[i]);
  free(rt->handles);
  free(rt->handle_gen);
  free(rt->free_slots);
  rt->handles = NULL;
  rt->handle_gen = NULL;
  rt->free_slots = NULL;
  rt->handle_cap = rt->nfree = 0;
  pthread_mutex_unlock(&rt->hmu);
}

double hvds__stuck_seconds(hvds_runtime_t* rt, double now) {
  pthread_mutex_lock(&rt->hmu);
  int blocked = rt->waiters > 0 || now - rt->wait_end < HVDS_WAIT_SLICE_GAP_S;
  double since = rt->last_completion > rt->blocked_since ? rt->last_completion : rt->blocked_since;
  pthread_mutex_unlock(&rt->hmu);
  return blocked && now > since ? now - since : 0.0;
}

void hvds__release(hvds_runtime_t* rt, hvds_handle_t id) {
  if (hvds__forked_copy(rt)) return;  // the parent's table, maybe locked when it forked
  pthread_mutex_lock(&rt->hmu);
  hvds_handle_rec_t* h = hvds__handle_find_locked(rt, id);
  if (h != NULL) {
    if (h->done) {
      drop_slot_locked(rt, h);
      record_free(h);
    } else {
      h->released = 1;
    }
  }
  pthread_mutex_unlock(&rt->hmu);
}
