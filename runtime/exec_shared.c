/* What every execution path shares, and the queues beneath it that end entries: an entry's end
 * and output, the fusion buffer, scaling after a reduction, the ring's segment, the timeline's
 * marks. Below execute.c and its execute_*.c files, which call it and never each other's
 * helpers. */
#include "exec_shared.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives.h"
#include "device_route.h"
#include "device_staging.h"
#include "dtype.h"
#include "handle.h"
#include "reduce.h"
#include "timeline.h"

void hvds__entry_free(hvds_entry_t* e) {
  if (e == NULL) return;
  if (e->name != e->name_buf) free(e->name);
  free(e->splits);
  free(e->ps_ranks);
  hvds__staging_free(e->staging);
  hvds__device_event_free(e->ready_event);
  free(e);
}

void hvds__entry_finish(hvds_runtime_t* rt, hvds_entry_t* e, hvds_result_t status,
                        const char* message) {
  pthread_mutex_lock(&rt->qmu);
  hvds_pset_t* s = rt->psets[e->process_set];
  if (s) hvds__name_map_remove_if(&s->inflight, e->name, e);
  pthread_mutex_unlock(&rt->qmu);
  char staging_error[768];
  if (e->staging != NULL) {
    hvds_result_t moved =
        hvds__unstage_entry(e, status, rt->rank, staging_error, sizeof(staging_error));
    if (moved != status) message = staging_error;
    status = moved;
  }
  hvds__handle_complete(rt, e->handle, status, message);
  hvds__entry_free(e);
}

void* hvds__entry_alloc_output(hvds_entry_t* e, int32_t ndim, const int64_t* shape, size_t bytes) {
  void* p;
  hvds_handle_rec_t* h = e->handle;
  if (e->alloc) {
    p = e->alloc(e->alloc_ctx, e->input.dtype, ndim, shape, bytes);
  } else {
    p = malloc(bytes ? bytes : 1);
    h->owned[e->index] = p;
  }
  if (p == NULL) return NULL;
  hvds_tensor_t* t = &h->outputs[e->index];
  t->data = p;
  t->dtype = e->input.dtype;
  t->device = e->staging == NULL ? e->input.device : -1;  // a staged result is on the host yet
  t->ndim = ndim;
  memcpy(t->shape, shape, (size_t)ndim * sizeof(int64_t));
  return p;
}

void* hvds__fusion_buffer(hvds_runtime_t* rt, size_t bytes) {
  if (bytes > rt->fusion_cap || rt->fusion_buf == NULL) {
    size_t cap = bytes ? bytes : 1;  // a collective of zero bytes still needs an address
    if ((int64_t)cap < rt->fusion_threshold) cap = (size_t)rt->fusion_threshold;
    void* p = realloc(rt->fusion_buf, cap);
    if (p == NULL) return NULL;
    rt->fusion_buf = p;
    rt->fusion_cap = cap;
  }
  return rt->fusion_buf;
}

void hvds__fusion_buffer_free(hvds_runtime_t* rt) {
  free(rt->fusion_buf);
  rt->fusion_buf = NULL;
  rt->fusion_cap = 0;
}

double hvds__post_factor(const hvds_pset_t* s, const hvds_response_t* r) {
  double f = r->postscale;
  if (r->reduce_op == HVDS_AVERAGE) f /= (double)s->n;
  return f;
}

void hvds__post_scale(const hvds_pset_t* s, const hvds_response_t* r, void* buf, size_t count,
                      hvds_dtype_t dtype) {
  if (r->reduce_op == HVDS_AVERAGE && r->postscale == 1.0)
    hvds__divide(buf, count, dtype, s->n);
  else
    hvds__scale(buf, count, dtype, hvds__post_factor(s, r));
}

void hvds__tl_start(hvds_runtime_t* rt, const hvds_response_t* r, const char* args) {
  if (!rt->timeline) return;
  for (int32_t i = 0; i < r->nnames; i++)
    hvds__timeline_start(rt->timeline, r->names[i], hvds__msg_type_name(r->type), args);
}

void hvds__tl_activity(hvds_runtime_t* rt, const hvds_response_t* r, const char* activity) {
  if (!rt->timeline) return;
  for (int32_t i = 0; i < r->nnames; i++) {
    if (activity)
      hvds__timeline_activity_start(rt->timeline, r->names[i], activity);
    else
      hvds__timeline_activity_end(rt->timeline, r->names[i]);
  }
}

void hvds__tl_end(hvds_runtime_t* rt, const hvds_response_t* r, hvds_exec_t* x) {
  if (!rt->timeline) return;
  for (int32_t i = 0; i < r->nnames; i++) {
    char shape[256] = "[]";
    hvds_entry_t* e = x->entries[i];
    if (e) {
      size_t off = (size_t)snprintf(shape, sizeof(shape), "[");
      for (int32_t d = 0; d < e->input.ndim && off < sizeof(shape); d++)
        off += (size_t)snprintf(shape + off, sizeof(shape) - off, d ? ", %lld" : "%lld",
                                (long long)e->input.shape[d]);
      if (off < sizeof(shape)) snprintf(shape + off, sizeof(shape) - off, "]");
    }
    hvds__timeline_end(rt->timeline, r->names[i], hvds__dtype_name((hvds_dtype_t)r->dtype), shape);
  }
}

/* Ring segment: the knob when set, else the ops' rule for the link measured at init (identical
 * on every rank: rank 0's probe is broadcast). */
size_t hvds__ring_chunk(hvds_runtime_t* rt, size_t bytes, int nranks) {
  if (rt->ring_chunk_bytes > 0) return (size_t)rt->ring_chunk_bytes;
  return hvds__coll_ring_segment(bytes, nranks, rt->net_beta);
}

size_t hvds__rhd_max(const hvds_runtime_t* rt) {
  if (rt->rhd_max_bytes >= 0) return (size_t)rt->rhd_max_bytes;
  return hvds__coll_rhd_max_for_link(rt->net_beta);
}
