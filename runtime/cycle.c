/* One negotiation-and-execution cycle, and which thread runs it. The coordinator thread runs
 * cycles by default; a thread blocked in hvds_wait() may run a due cycle itself while no other
 * thread owns it, saving the hand-offs from the caller to the coordinator and back. Ownership
 * is taken and given back under rt.qmu, so the fields that state.h marks "coord" are touched by
 * one thread at a time. */
#include "cycle.h"

#include <stdlib.h>

#include "autotune.h"
#include "controller.h"
#include "coordinator.h"
#include "execute.h"
#include "log.h"
#include "timeline.h"

#define rt hvds__rt

/* Whether a cycle should run now: local work, a stop, or the cycle time passed since the
 * latest cycle, whichever thread ran it. */
static int due_locked(double now) {
  return rt.wake || atomic_load(&rt.shutdown_requested) ||
         now >= rt.last_cycle_start + rt.cycle_ms / 1000.0;
}

int hvds__cycle_acquire(hvds_cycle_runner_t who, double* next, int* result) {
  pthread_mutex_lock(&rt.qmu);
  double now = hvds__now();
  *result = rt.cycle_result;
  int took = *result == 0 && !rt.cycle_owned && due_locked(now) &&
             (who == HVDS_CYCLE_COORDINATOR ||
              (rt.caller_runs && !atomic_load(&rt.shutdown_requested)));
  if (took) {
    // Atomic stores: grace_for_callers() reads both without qmu.
    __atomic_store_n(&rt.cycle_owned, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&rt.wake, 0, __ATOMIC_RELEASE); /* the queues are read after this point */
    rt.last_cycle_start = now;
  }
  /* Someone else's cycle may run long: look again a cycle time from now, not from its start. */
  *next = rt.cycle_owned && !took ? now + rt.cycle_ms / 1000.0
                                   : rt.last_cycle_start + rt.cycle_ms / 1000.0;
  pthread_mutex_unlock(&rt.qmu);
  return took;
}

double hvds__cycle_release(int result, int due_now) {
  pthread_mutex_lock(&rt.qmu);
  __atomic_store_n(&rt.cycle_owned, 0, __ATOMIC_RELEASE);
  if (due_now) rt.last_cycle_start = 0;
  if (result != 0 && rt.cycle_result == 0) rt.cycle_result = result;
  /* Work that arrived meanwhile, or the end of the loop: the coordinator must look now. */
  if (rt.wake || result != 0) hvds__coord_wake_locked();
  double next = rt.last_cycle_start + rt.cycle_ms / 1000.0;
  pthread_mutex_unlock(&rt.qmu);
  return next;
}

void hvds__cycle_end(int result) {
  pthread_mutex_lock(&rt.qmu);
  if (rt.cycle_result == 0) rt.cycle_result = result;
  pthread_mutex_unlock(&rt.qmu);
}

/* Applies hvds_start_timeline / hvds_stop_timeline requests on the owner's thread. */
static void timeline_requests(void) {
  pthread_mutex_lock(&rt.qmu);
  char* path = rt.timeline_request;
  int pending = rt.timeline_pending, marks = rt.timeline_request_marks;
  rt.timeline_request = NULL;
  rt.timeline_pending = 0;
  pthread_mutex_unlock(&rt.qmu);
  if (!pending) return;
  hvds__timeline_close(rt.timeline);
  rt.timeline = NULL;
  if (path && path[0] && rt.rank == 0) {
    char err[256];
    if (hvds__timeline_open(path, marks, &rt.timeline, err, sizeof(err)) != HVDS_SUCCESS)
      HVDS_WARN("timeline not started: %s", err);
  }
  free(path);
}

/* One cycle over every set this rank belongs to. Returns 0 to go on, 1 to stop, -1 on failure. */
/* Bytes the allreduce responses move (what autotune scores). */
static double allreduce_bytes(const hvds_response_t* r, int32_t n) {
  double bytes = 0;
  for (int32_t i = 0; i < n; i++) {
    if (r[i].type != HVDS_MSG_ALLREDUCE) continue;
    for (int32_t k = 0; k < r[i].nsizes; k++)
      bytes += (double)r[i].sizes[k] * (double)hvds_dtype_size((hvds_dtype_t)r[i].dtype);
  }
  return bytes;
}

static int run_sets(void) {
  int stop = 0, busy = 0;
  double tuned_bytes = 0;
  for (int32_t id = 0; id < HVDS_MAX_PROCESS_SETS; id++) {
    pthread_mutex_lock(&rt.qmu);
    hvds_pset_t* s = rt.psets[id];
    pthread_mutex_unlock(&rt.qmu);
    if (s == NULL || s->my_rank < 0) continue;
    hvds_response_t* resps = NULL;
    int32_t n = 0;
    int shutdown = 0;
    int want = id == 0 && atomic_load(&rt.shutdown_requested);
    hvds_result_t rc = hvds__negotiate(s, want, &resps, &n, &shutdown);
    if (id == 0 && rc == HVDS_SUCCESS) tuned_bytes = allreduce_bytes(resps, n);
    for (int32_t i = 0; i < n; i++) {
      if (rc == HVDS_SUCCESS) rc = hvds__execute(s, &resps[i]);
      hvds__response_free(&resps[i]);
    }
    free(resps);
    if (rc != HVDS_SUCCESS) {
      hvds__record_fault(s, rc);
      return -1;
    }
    if (id == 0) {
      stop = shutdown;
      busy = s->busy_anywhere;
      rt.world_epoch++;
    }
  }
  rt.idle_cycles = busy ? 0 : rt.idle_cycles + 1;
  hvds_result_t rc = hvds__autotune_cycle(rt.psets[0], rt.last_cycle_start, tuned_bytes);
  if (rc != HVDS_SUCCESS) {
    hvds__record_fault(rt.psets[0], rc);
    return -1;
  }
  return stop;
}

int hvds__cycle_run(void) {
  timeline_requests();
  if (rt.timeline && rt.mark_cycles) hvds__timeline_mark_cycle(rt.timeline);
  return run_sets();
}

int hvds__cycle_run_as_caller(void) {
  double next;
  int result;
  if (!hvds__cycle_acquire(HVDS_CYCLE_CALLER, &next, &result)) return 0;
  hvds__cycle_release(hvds__cycle_run(), 0);
  return 1;
}
