/* The public handle functions (hvdsparse.h): poll, wait, an operation's error, outputs and
 * splits, release, on the process's runtime. The table they read is handle.c's. */
#include <stdlib.h>

#include "handle.h"
#include "handle_wait.h"

int hvds_poll(hvds_handle_t id) {
  hvds_runtime_t* rt = &hvds__rt;
  if (hvds__forked_copy(rt)) {  // the handle's operation runs, if at all, in the parent
    hvds__forked_error(rt, "poll");
    return -1;
  }
  pthread_mutex_lock(&rt->hmu);
  hvds_handle_rec_t* h = hvds__handle_find_locked(rt, id);
  int r = h ? h->done : -1;
  pthread_mutex_unlock(&rt->hmu);
  return r;
}

hvds_result_t hvds_wait(hvds_handle_t id, int32_t timeout_ms) {
  return hvds__wait(&hvds__rt, id, timeout_ms);
}

const char* hvds_handle_error(hvds_handle_t id) {
  hvds_runtime_t* rt = &hvds__rt;
  if (hvds__forked_copy(rt)) return hvds_last_error();  // why the wait failed here
  pthread_mutex_lock(&rt->hmu);
  hvds_handle_rec_t* h = hvds__handle_find_locked(rt, id);
  const char* m = (h && h->message) ? h->message : "";
  pthread_mutex_unlock(&rt->hmu);
  return m; /* valid until release */
}

hvds_result_t hvds_handle_output(hvds_handle_t id, int32_t i, hvds_tensor_t* output) {
  hvds_runtime_t* rt = &hvds__rt;
  hvds_result_t rc = HVDS_SUCCESS;
  pthread_mutex_lock(&rt->hmu);
  hvds_handle_rec_t* h = hvds__handle_find_locked(rt, id);
  if (h == NULL || i < 0 || i >= h->n || output == NULL)
    rc = HVDS_INVALID_ARGUMENT;
  else if (!h->done)
    rc = HVDS_IN_PROGRESS;
  else
    *output = h->outputs[i];
  pthread_mutex_unlock(&rt->hmu);
  return rc;
}

void* hvds_handle_take_output(hvds_handle_t id, int32_t i) {
  hvds_runtime_t* rt = &hvds__rt;
  void* p = NULL;
  pthread_mutex_lock(&rt->hmu);
  hvds_handle_rec_t* h = hvds__handle_find_locked(rt, id);
  if (h && h->done && i >= 0 && i < h->n) {
    p = h->owned[i];
    h->owned[i] = NULL;
  }
  pthread_mutex_unlock(&rt->hmu);
  return p;
}

void hvds_free(void* p) { free(p); }

int32_t hvds_handle_splits(hvds_handle_t id, const int32_t** splits) {
  hvds_runtime_t* rt = &hvds__rt;
  int32_t n = -1;
  pthread_mutex_lock(&rt->hmu);
  hvds_handle_rec_t* h = hvds__handle_find_locked(rt, id);
  if (h && h->done && splits != NULL) {
    *splits = h->recv_splits;
    n = h->nrecv_splits;
  }
  pthread_mutex_unlock(&rt->hmu);
  return n;
}

int32_t hvds_handle_join_rank(hvds_handle_t id) {
  hvds_runtime_t* rt = &hvds__rt;
  int32_t r = -1;
  pthread_mutex_lock(&rt->hmu);
  hvds_handle_rec_t* h = hvds__handle_find_locked(rt, id);
  if (h && h->done) r = h->join_rank;
  pthread_mutex_unlock(&rt->hmu);
  return r;
}

void hvds_release(hvds_handle_t id) { hvds__release(&hvds__rt, id); }
