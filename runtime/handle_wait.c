/* hvds_wait: the caller runs due cycles itself while its operation is pending (cycle.h), then
 * sleeps on the handle table's condition variable. Above the cycle, which the handle table
 * beneath it never calls. */
#include "handle_wait.h"

#include <errno.h>
#include <time.h>

#include "cycle.h"
#include "handle.h"

__thread int hvds__served_itself;

/* Runs cycles on the waiting thread while the handle is pending, the deadline (monotonic
 * seconds, < 0 none) has not passed, and a cycle is due and free. Returns 1 when it ran at
 * least one and the handle is done. */
static int run_cycles_while_pending(hvds_runtime_t* rt, hvds_handle_t id, double deadline) {
  for (int ran = 0;; ran = 1) {
    if (deadline >= 0 && hvds__now() >= deadline) return 0;
    pthread_mutex_lock(&rt->hmu);
    hvds_handle_rec_t* h = hvds__handle_find_locked(rt, id);
    int pending = h != NULL && !h->done;
    pthread_mutex_unlock(&rt->hmu);
    if (!pending) return ran && h != NULL;
    if (!hvds__cycle_run_as_caller(rt, id)) return 0;
  }
}

static hvds_result_t wait_for(hvds_runtime_t* rt, hvds_handle_t id, int32_t timeout_ms) {
  if (timeout_ms != 0)
    hvds__served_itself =
        run_cycles_while_pending(rt, id, timeout_ms < 0 ? -1.0 : hvds__now() + timeout_ms / 1000.0);
  struct timespec deadline = hvds__deadline_in(timeout_ms / 1000.0);
  pthread_mutex_lock(&rt->hmu);
  hvds_handle_rec_t* h = hvds__handle_find_locked(rt, id);
  while (h != NULL && !h->done) {
    if (timeout_ms < 0) {
      pthread_cond_wait(&rt->hcv, &rt->hmu);
    } else if (pthread_cond_timedwait(&rt->hcv, &rt->hmu, &deadline) == ETIMEDOUT) {
      pthread_mutex_unlock(&rt->hmu);
      return HVDS_TIMEOUT;
    }
    h = hvds__handle_find_locked(rt, id);
  }
  hvds_result_t r = h ? h->status : HVDS_INVALID_ARGUMENT;
  pthread_mutex_unlock(&rt->hmu);
  if (h == NULL)
    return hvds__set_error(HVDS_INVALID_ARGUMENT, "unknown handle %lld", (long long)id);
  return r;
}

hvds_result_t hvds__wait(hvds_runtime_t* rt, hvds_handle_t id, int32_t timeout_ms) {
  if (hvds__forked_copy(rt)) return hvds__forked_error(rt, "synchronize");  // no coordinator here
  if (timeout_ms == 0) return wait_for(rt, id, 0);
  pthread_mutex_lock(&rt->hmu);
  double now = hvds__now();
  if (rt->waiters++ == 0 && now - rt->wait_end >= HVDS_WAIT_SLICE_GAP_S) rt->blocked_since = now;
  pthread_mutex_unlock(&rt->hmu);
  hvds_result_t r = wait_for(rt, id, timeout_ms);
  pthread_mutex_lock(&rt->hmu);
  rt->waiters--;
  rt->wait_end = hvds__now();
  pthread_mutex_unlock(&rt->hmu);
  return r;
}
