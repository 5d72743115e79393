/* The steps every enqueue shares (enqueue.h): whether this rank may queue on a process set, a
 * new entry from the options, and the hand-off of entries to the set's queue under one handle,
 * which wakes the coordinator. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "enqueue.h"
#include "exec_shared.h"
#include "handle.h"
#include "handle_wait.h"
#include "log.h"
#include "state.h"

static const char* const kShutDownText =
    "Horovod has been shut down. This was caused by an exception on one of the ranks or an attempt "
    "to allreduce, allgather or broadcast a tensor after one of the ranks finished execution. If "
    "the shutdown was caused by an exception, you should see the exception in the log before the "
    "first shutdown message.";
static const char* const kDuplicateText =
    "Requested to allreduce, allgather, or broadcast a tensor with the same name as another tensor "
    "that is currently being processed.  If you want to request another tensor, use a different "
    "tensor name.";

hvds_result_t hvds__enqueue_ready(hvds_runtime_t* rt, int32_t ps, const char* what) {
  if (hvds__forked_copy(rt)) return hvds__forked_error(rt, what);
  if (!atomic_load(&rt->initialized))
    return hvds__set_error(HVDS_INVALID_USAGE, "Horovod has not been initialized; use hvd.init().");
  if (atomic_load(&rt->shut_down)) {
    if (rt->fatal[0]) return hvds__set_error(HVDS_SHUT_DOWN, "%s %s", kShutDownText, rt->fatal);
    return hvds__set_error(HVDS_SHUT_DOWN, "%s", kShutDownText);
  }
  pthread_mutex_lock(&rt->qmu);
  hvds_pset_t* s = (ps >= 0 && ps < HVDS_MAX_PROCESS_SETS) ? rt->psets[ps] : NULL;
  int exists = s != NULL && !s->marked_removed;
  int member = exists && s->my_rank >= 0;
  pthread_mutex_unlock(&rt->qmu);
  if (!exists)
    return hvds__set_error(HVDS_INVALID_ARGUMENT,
                           "%s: Process set provided does not exist, or has not been registered.",
                           what);
  if (!member)
    return hvds__set_error(HVDS_INVALID_ARGUMENT,
                           "%s: Rank %d is not a member of the provided process set.", what,
                           rt->rank);
  return HVDS_SUCCESS;
}

hvds_entry_t* hvds__enqueue_entry_new(const char* name, int32_t type, const hvds_op_options_t* o) {
  hvds_entry_t* e = calloc(1, sizeof(*e));
  if (e == NULL) return NULL;
  size_t len = strlen(name);
  e->name = len < sizeof(e->name_buf) ? memcpy(e->name_buf, name, len + 1) : strdup(name);
  if (e->name == NULL) {
    free(e);
    return NULL;
  }
  e->type = type;
  e->op = o ? o->op : HVDS_SUM;
  e->prescale = o ? o->prescale : 1.0;
  e->postscale = o ? o->postscale : 1.0;
  e->root_rank = o ? o->root_rank : 0;
  e->alloc = o ? o->alloc : NULL;
  e->alloc_ctx = o ? o->alloc_ctx : NULL;
  e->process_set = o ? o->process_set : 0;
  e->enqueue_time = hvds__now();
  return e;
}

hvds_result_t hvds__enqueue_submit_all(hvds_runtime_t* rt, hvds_entry_t** es, int32_t n,
                                       hvds_handle_t* handle) {
  hvds_handle_rec_t* h = hvds__handle_create(rt, n);
  if (h == NULL) return hvds__set_error(HVDS_SYSTEM_ERROR, "out of memory creating a handle");
  pthread_mutex_lock(&rt->qmu);
  hvds_pset_t* s = rt->psets[es[0]->process_set];
  for (int32_t i = 0; i < n; i++) {
    int dup = hvds__name_map_get(&s->inflight, es[i]->name) != NULL;
    for (int32_t j = 0; j < i && !dup; j++) dup = strcmp(es[i]->name, es[j]->name) == 0;
    if (dup) {
      pthread_mutex_unlock(&rt->qmu);
      hvds__set_error(HVDS_INVALID_ARGUMENT, "%s [tensor: %s]", kDuplicateText, es[i]->name);
      pthread_mutex_lock(&rt->hmu);
      h->released = 1;
      pthread_mutex_unlock(&rt->hmu);
      for (int32_t k = 0; k < n; k++) hvds__handle_complete(rt, h, HVDS_INVALID_ARGUMENT, NULL);
      return HVDS_INVALID_ARGUMENT;
    }
  }
  for (int32_t i = 0; i < n; i++) {
    hvds_entry_t* e = es[i];
    e->handle = h;
    e->index = i;
    e->seq = rt->entries_queued++;
    hvds__name_map_put(&s->inflight, e->name, e);
    if (s->q_tail)
      s->q_tail->next = e;
    else
      s->q_head = e;
    s->q_tail = e;
  }
  __atomic_store_n(&rt->enqueued, rt->enqueued + 1, __ATOMIC_RELEASE);
  /* Signals only a sleeping coordinator, and not even that when this thread ran its previous
   * operation itself: it will likely wait and run this one too (one enqueue only: a thread
   * queueing several without waiting wakes the coordinator from its second on). */
  if (hvds__served_itself)
    hvds__coord_wake_lazy_locked(rt);
  else
    hvds__coord_wake_locked(rt);
  hvds__served_itself = 0;
  pthread_mutex_unlock(&rt->qmu);
  *handle = h->id;
  return HVDS_SUCCESS;
}

hvds_result_t hvds__enqueue_submit(hvds_runtime_t* rt, hvds_entry_t* e, hvds_handle_t* handle) {
  hvds_result_t rc = hvds__enqueue_submit_all(rt, &e, 1, handle);
  if (rc != HVDS_SUCCESS) hvds__entry_free(e);
  return rc;
}
