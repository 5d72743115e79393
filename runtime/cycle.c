/* One negotiation-and-execution cycle, and which thread runs it. The coordinator thread runs
 * cycles by default; a thread blocked in hvds_wait() may run a due cycle itself while no other
 * thread owns it, saving the hand-offs from the caller to the coordinator and back. Ownership
 * is taken and given back under rt->qmu, so the fields that state.h marks "coord" are touched by
 * one thread at a time. */
#include "cycle.h"

#include <stdlib.h>
#include <string.h>

#include "autotune.h"
#include "controller.h"
#include "dtype.h"
#include "execute.h"
#include "fault_record.h"
#include "handle.h"
#include "log.h"
#include "thread_priority.h"
#include "timeline.h"

/* Whether a cycle should run now: local work, a stop, or the cycle time passed since the
 * latest cycle, whichever thread ran it. */
static int due_locked(hvds_runtime_t* rt, double now) {
  return rt->wake || atomic_load(&rt->shutdown_requested) ||
         now >= rt->last_cycle_start + rt->cycle_ms / 1000.0;
}

int hvds__cycle_acquire(hvds_runtime_t* rt, hvds_cycle_runner_t who, double* next, int* result) {
  pthread_mutex_lock(&rt->qmu);
  double now = hvds__now();
  *result = rt->cycle_result;
  /* A caller only in a running runtime: a thread still waiting on an operation of the last
   * one must not start a cycle while init builds the next (its sets and transports). */
  int took = *result == 0 && !rt->cycle_owned && due_locked(rt, now) &&
             (who == HVDS_CYCLE_COORDINATOR || (rt->caller_runs && atomic_load(&rt->initialized) &&
                                                !atomic_load(&rt->shutdown_requested)));
  if (took) {
    // Atomic stores: grace_for_callers(rt) reads both without qmu.
    __atomic_store_n(&rt->cycle_owned, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&rt->wake, 0, __ATOMIC_RELEASE); /* the queues are read after this point */
    rt->last_cycle_start = now;
  }
  /* Someone else's cycle may run long: look again a cycle time from now, not from its start. */
  *next = rt->cycle_owned && !took ? now + rt->cycle_ms / 1000.0
                                   : rt->last_cycle_start + rt->cycle_ms / 1000.0;
  pthread_mutex_unlock(&rt->qmu);
  return took;
}

double hvds__cycle_release(hvds_runtime_t* rt, int result, int due_now) {
  pthread_mutex_lock(&rt->qmu);
  __atomic_store_n(&rt->cycle_owned, 0, __ATOMIC_RELEASE);
  if (due_now) rt->last_cycle_start = 0;
  if (result != 0 && rt->cycle_result == 0) rt->cycle_result = result;
  /* Work that arrived meanwhile, or the end of the loop: the coordinator must look now. */
  if (rt->wake || result != 0) hvds__coord_wake_locked(rt);
  double next = rt->last_cycle_start + rt->cycle_ms / 1000.0;
  pthread_mutex_unlock(&rt->qmu);
  return next;
}

void hvds__cycle_end(hvds_runtime_t* rt, int result) {
  pthread_mutex_lock(&rt->qmu);
  if (rt->cycle_result == 0) rt->cycle_result = result;
  pthread_mutex_unlock(&rt->qmu);
}

/* Applies hvds_start_timeline / hvds_stop_timeline requests on the owner's thread. */
static void timeline_requests(hvds_runtime_t* rt) {
  pthread_mutex_lock(&rt->qmu);
  char* path = rt->timeline_request;
  int pending = rt->timeline_pending, marks = rt->timeline_request_marks;
  rt->timeline_request = NULL;
  rt->timeline_pending = 0;
  pthread_mutex_unlock(&rt->qmu);
  if (!pending) return;
  hvds__timeline_close(rt->timeline);
  rt->timeline = NULL;
  if (path && path[0] && rt->rank == 0) {
    char err[256];
    if (hvds__timeline_open(path, marks, &rt->timeline, err, sizeof(err)) != HVDS_SUCCESS)
      HVDS_WARN("timeline not started: %s", err);
  }
  free(path);
}

/* Bytes the allreduce responses move (what autotune scores). */
static double allreduce_bytes(const hvds_response_t* r, int32_t n) {
  double bytes = 0;
  for (int32_t i = 0; i < n; i++) {
    if (r[i].type != HVDS_MSG_ALLREDUCE) continue;
    for (int32_t k = 0; k < r[i].nsizes; k++)
      bytes += (double)r[i].sizes[k] * (double)hvds__dtype_bytes((hvds_dtype_t)r[i].dtype);
  }
  return bytes;
}

static int handle_done(hvds_runtime_t* rt, hvds_handle_t id) {
  pthread_mutex_lock(&rt->hmu);
  hvds_handle_rec_t* h = hvds__handle_find_locked(rt, id);
  int done = h == NULL || h->done;
  pthread_mutex_unlock(&rt->hmu);
  return done;
}

/* Executes set s's responses from *next on, freeing each; stops early, with *next at the first
 * one left, once awaited (non-zero) is complete and responses remain. Returns the first
 * failure. */
static hvds_result_t execute_from(hvds_pset_t* s, hvds_response_t* resps, int32_t n,
                                  int32_t* next, hvds_handle_t awaited) {
  hvds_runtime_t* rt = s->rt;
  hvds_result_t rc = HVDS_SUCCESS;
  while (*next < n) {
    if (rc == HVDS_SUCCESS && awaited && *next > 0 && handle_done(rt, awaited)) return rc;
    if (rc == HVDS_SUCCESS) rc = hvds__execute(s, &resps[*next]);
    hvds__response_free(&resps[*next]);
    ++*next;
  }
  return rc;
}

/* Keeps the responses of set id from next on for the next owner of the cycle. */
static void leave_rest(hvds_runtime_t* rt, int32_t id, hvds_response_t* resps, int32_t n,
                       int32_t next, double tuned_bytes) {
  rt->rest.tuned_bytes = tuned_bytes;
  rt->rest.resps = resps;
  rt->rest.n = n;
  rt->rest.next = next;
  rt->rest.set_id = id;
  __atomic_store_n(&rt->rest_pending, 1, __ATOMIC_RELEASE);
}

void hvds__cycle_drop_rest(hvds_runtime_t* rt) {
  for (int32_t i = rt->rest.next; rt->rest.resps && i < rt->rest.n; i++)
    hvds__response_free(&rt->rest.resps[i]);
  free(rt->rest.resps);
  memset(&rt->rest, 0, sizeof(rt->rest));
  __atomic_store_n(&rt->rest_pending, 0, __ATOMIC_RELEASE);
}

/* Whether the next cycle is due at once. A rank whose entries are still pending after a round
 * waits for a peer that missed it (the peer's own work came a moment later, and the peer starts
 * the next round right away); waiting the cycle time instead holds that peer up by as long, and
 * once every operation takes a cycle time the ranks' timers all fall due as operations end, so
 * the idle rounds they run keep it that way. Rounds that run nothing are eager only a few times
 * in a row: ranks waiting for tensors their peers have not submitted go back to the cycle time
 * (the next round waits for every peer anyway, so an eager rank does not spin on its own). */
#define EAGER_ROUNDS_MAX 8
static void decide_due_again(hvds_runtime_t* rt, int executed) {
  rt->empty_rounds = executed ? 0 : rt->empty_rounds + 1;
  rt->due_again = 0;
  if (rt->empty_rounds > EAGER_ROUNDS_MAX) return;
  /* The table and the pending maps belong to the cycle's owner: no lock (as in run_sets). */
  for (int32_t id = 0; id < rt->next_ps_id && !rt->due_again; id++) {
    const hvds_pset_t* s = rt->psets[id];
    rt->due_again = s != NULL && s->my_rank >= 0 && s->pending.count > 0;
  }
}

int hvds__cycle_due_again(hvds_runtime_t* rt) { return rt->due_again; }

static int fail(hvds_pset_t* s, hvds_result_t rc) {
  hvds__record_fault(s, rc);
  return -1;
}

/* One cycle over every set this rank belongs to, or the rest of one a caller left (its
 * operations first, then the sets after the one it stopped in: every rank runs the same
 * collectives in the same order, whichever thread runs them). Returns 0 to go on, 1 to stop,
 * -1 on failure; 2 when it stopped early for awaited and left the rest. */
static int run_sets(hvds_runtime_t* rt, hvds_handle_t awaited) {
  int stop = 0, busy = 0, executed = 0;
  double tuned_bytes = 0;
  int32_t first = 0;
  if (rt->rest.resps) {
    hvds_pset_t* s = rt->psets[rt->rest.set_id];
    int32_t next = rt->rest.next;
    hvds_result_t rc = execute_from(s, rt->rest.resps, rt->rest.n, &next, awaited);
    if (rc != HVDS_SUCCESS) {
      rt->rest.next = next;
      hvds__cycle_drop_rest(rt);
      return fail(s, rc);
    }
    if (next < rt->rest.n) {
      rt->rest.next = next;
      decide_due_again(rt, 1);
      return 2;
    }
    first = rt->rest.set_id + 1;
    tuned_bytes = rt->rest.tuned_bytes;
    free(rt->rest.resps);
    memset(&rt->rest, 0, sizeof(rt->rest));
    __atomic_store_n(&rt->rest_pending, 0, __ATOMIC_RELEASE);
    busy = 1;
  }
  /* Sets are added and removed only by the cycle's owner (executing a response), so it reads
   * the table without qmu; every set's id is below next_ps_id. */
  for (int32_t id = first; id < rt->next_ps_id; id++) {
    hvds_pset_t* s = rt->psets[id];
    if (s == NULL || s->my_rank < 0) continue;
    hvds_response_t* resps = NULL;
    int32_t n = 0, next = 0;
    int shutdown = 0;
    int want = id == 0 && atomic_load(&rt->shutdown_requested);
    hvds_result_t rc = hvds__negotiate(s, want, &resps, &n, &shutdown);
    if (rc != HVDS_SUCCESS) return fail(s, rc);
    if (id == 0) {
      tuned_bytes = allreduce_bytes(resps, n);
      stop = shutdown;
      busy = s->busy_anywhere;
      rt->world_epoch++;
    }
    executed |= n > 0;
    rc = execute_from(s, resps, n, &next, stop ? 0 : awaited);
    if (rc != HVDS_SUCCESS) {
      free(resps);
      return fail(s, rc);
    }
    if (next < n) {
      leave_rest(rt, id, resps, n, next, tuned_bytes);
      decide_due_again(rt, 1);
      return 2;
    }
    free(resps);
  }
  decide_due_again(rt, executed);
  rt->idle_cycles = busy ? 0 : rt->idle_cycles + 1;
  hvds_result_t rc = hvds__autotune_cycle(rt->psets[0], rt->last_cycle_start, tuned_bytes);
  if (rc != HVDS_SUCCESS) return fail(rt->psets[0], rc);
  return stop;
}

int hvds__cycle_run(hvds_runtime_t* rt) {
  timeline_requests(rt);
  if (rt->timeline && rt->mark_cycles) hvds__timeline_mark_cycle(rt->timeline);
  int r = run_sets(rt, 0);
  return r == 2 ? 0 : r;
}

int hvds__cycle_run_as_caller(hvds_runtime_t* rt, hvds_handle_t awaited) {
  double next;
  int result;
  if (!hvds__cycle_acquire(rt, HVDS_CYCLE_CALLER, &next, &result)) return 0;
  hvds_priority_saved_t saved; /* the coordinator's work at the coordinator's priority */
  hvds__priority_lend(__atomic_load_n(&rt->coord_level, __ATOMIC_ACQUIRE), &saved);
  timeline_requests(rt);
  if (rt->timeline && rt->mark_cycles) hvds__timeline_mark_cycle(rt->timeline);
  int r = run_sets(rt, awaited);
  hvds__priority_restore(&saved);
  if (r == 2) { /* the rest is the coordinator's: due at once */
    pthread_mutex_lock(&rt->qmu);
    __atomic_store_n(&rt->wake, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&rt->qmu);
  }
  hvds__cycle_release(rt, r == 2 ? 0 : r, r == 0 && rt->due_again);
  return 1;
}
