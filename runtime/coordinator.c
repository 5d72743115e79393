/* The coordinator loop: wait for work or the cycle time, negotiate every set this rank belongs
 * to, execute the responses, and on a communication failure stop everything with a message that
 * names the root cause. */
#include "coordinator.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cycle.h"
#include "exec_shared.h"
#include "lane.h"
#include "log.h"
#include "p2p.h"
#include "param.h"
#include "store.h"
#include "store_keys.h"
#include "thread_priority.h"
#include "timeline.h"

static int local_reason_locked(hvds_runtime_t* rt) {
  return rt->wake || atomic_load(&rt->shutdown_requested) || rt->cycle_result;
}

/* Waits on the condition variable until local work, a stop, or the deadline (< 0: none).
 * Polls for a few microseconds first: work often follows a completion at once (the framework
 * enqueues its next tensor), and a futex wake-up costs more than that on a busy machine. The
 * wake flag stays set: whoever runs the next cycle clears it. */
static void wait_local(hvds_runtime_t* rt, double deadline) {
  double spin_until = hvds__now() + rt->spin_us * 1e-6;
  while (rt->spin_us > 0 && hvds__now() < spin_until &&
         !__atomic_load_n(&rt->wake, __ATOMIC_ACQUIRE))
    __builtin_ia32_pause();
  pthread_mutex_lock(&rt->qmu);
  while (!local_reason_locked(rt)) {
    rt->coord_sleeping = 1;
    int rc = 0;
    if (deadline < 0) {
      rt->coord_sleeps_forever = 1;
      pthread_cond_wait(&rt->qcv, &rt->qmu);
      rt->coord_sleeps_forever = 0;
    } else {
      double left = deadline - hvds__now();
      if (left <= 0) {
        rt->coord_sleeping = 0;
        break;
      }
      struct timespec ts = hvds__deadline_in(left);
      rc = pthread_cond_timedwait(&rt->qcv, &rt->qmu, &ts);
    }
    rt->coord_sleeping = 0;
    if (rc == ETIMEDOUT) break;
  }
  pthread_mutex_unlock(&rt->qmu);
}

/* Every rank has been idle for a while: sleep on the doorbell instead of beating. Whoever gets
 * local work first rings every peer, stamped with this cycle's epoch, and all go on together.
 * Called by the cycle's owner: the doorbell uses the transport. */
static void sleep_on_bell(hvds_runtime_t* rt) {
  hvds_p2p_t* w = rt->world;
  pthread_mutex_lock(&rt->qmu);
  int local = local_reason_locked(rt);
  rt->coord_bell_sleeping = !local;
  pthread_mutex_unlock(&rt->qmu);
  hvds_result_t rc = local ? HVDS_IN_PROGRESS : hvds__p2p_bell_wait(w, rt->world_epoch);
  pthread_mutex_lock(&rt->qmu);
  rt->coord_bell_sleeping = 0;
  local = local_reason_locked(rt);
  pthread_mutex_unlock(&rt->qmu);
  if (rc == HVDS_SUCCESS || (rc != HVDS_IN_PROGRESS && !local)) return; /* rung, or failed */
  if (hvds__p2p_bell_ring(w, rt->world_epoch) != HVDS_SUCCESS)
    HVDS_DEBUG("doorbell ring failed: %s", w->error); /* the next cycle reports the failure */
}

void hvds__coord_fail_all(hvds_runtime_t* rt, hvds_result_t status, const char* message) {
  for (int32_t id = 0; id < HVDS_MAX_PROCESS_SETS; id++) {
    hvds_pset_t* s = rt->psets[id];
    if (s == NULL) continue;
    pthread_mutex_lock(&rt->qmu);
    hvds_entry_t* e = s->q_head;
    s->q_head = s->q_tail = NULL;
    pthread_mutex_unlock(&rt->qmu);
    hvds__lane_clear(s); /* its entries are in pending, finished below */
    while (e) {
      hvds_entry_t* next = e->next;
      hvds__entry_finish(rt, e, status, message);
      e = next;
    }
    for (size_t i = 0; i < s->pending.cap; i++) {
      if (!hvds__name_map_live(&s->pending, i)) continue;
      hvds_entry_t* p = s->pending.slots[i].value;
      hvds__name_map_remove(&s->pending, s->pending.slots[i].key);
      hvds__entry_finish(rt, p, status, message);
    }
    s->join_entry = NULL;
  }
}

/* Work was just queued: give the thread that queued it a moment to enter hvds_wait() and run
 * the cycle itself (cheaper than the hand-off), and take it only if nobody did. While the
 * thread keeps queueing (a model's gradients arrive in a burst) the moment starts again, up to
 * BURST_MAX_S: a cycle that took the first half of a burst would cost every rank a second
 * negotiation and a second fused operation for the rest. No grace for the rest of a cycle a
 * caller left: it is due at once. */
#define CALLER_GRACE_S 50e-6
#define BURST_MAX_S 1e-3
static void grace_for_callers(hvds_runtime_t* rt) {
  if (!rt->caller_runs || __atomic_load_n(&rt->rest_pending, __ATOMIC_ACQUIRE)) return;
  double now = hvds__now(), cap = now + BURST_MAX_S, until = now + CALLER_GRACE_S;
  uint64_t seen = __atomic_load_n(&rt->enqueued, __ATOMIC_ACQUIRE);
  while (__atomic_load_n(&rt->wake, __ATOMIC_ACQUIRE) &&
         !__atomic_load_n(&rt->cycle_owned, __ATOMIC_ACQUIRE) && (now = hvds__now()) < until) {
    sched_yield();
    uint64_t count = __atomic_load_n(&rt->enqueued, __ATOMIC_ACQUIRE);
    if (count != seen) {
      seen = count;
      until = now + CALLER_GRACE_S < cap ? now + CALLER_GRACE_S : cap;
    }
  }
}

/* Runs cycles until every rank agreed to stop or communication failed: at once when work is
 * queued, else after the cycle time; once every rank has been idle for idle_sleep_cycles, no
 * heartbeat at all until work appears somewhere. A cycle a waiting caller ran counts as one of
 * ours: the next is due a cycle time after it. */
static void raise_priority(hvds_runtime_t* rt);

static int coord_loop(hvds_runtime_t* rt, long* cycles) {
  int result = 0;
  for (;;) {
    int wanted = __atomic_exchange_n(&rt->coord_priority_pending, -1, __ATOMIC_ACQ_REL);
    if (wanted >= 0) {  // a binding preferred another scheduling since init
      rt->coord_priority = wanted;
      raise_priority(rt);
    }
    double next = 0;
    int took = hvds__cycle_acquire(rt, HVDS_CYCLE_COORDINATOR, &next, &result);
    if (result != 0) break;
    if (!took) {
      wait_local(rt, next);
      grace_for_callers(rt);
      continue;
    }
    (*cycles)++;
    if ((result = hvds__cycle_run(rt)) != 0) break;
    int idle = rt->idle_sleep_cycles > 0 && rt->idle_cycles >= rt->idle_sleep_cycles;
    if (idle && rt->size > 1 && hvds__p2p_has_bell(rt->world)) {
      sleep_on_bell(rt);
      hvds__cycle_release(rt, 0, 1); /* rung or woken: the next cycle is due at once */
      continue;
    }
    next = hvds__cycle_release(rt, 0, hvds__cycle_due_again(rt));
    wait_local(rt, idle && rt->size == 1 ? -1 : next);
    grace_for_callers(rt);
  }
  hvds__cycle_end(rt, result);
  return result;
}

/* After a stop that a peer asked for: which rank stopped first and why, when one said so
 * (hvds_set_shutdown_reason; published before its stop), into rt->fatal, which every operation
 * the stop fails or refuses then quotes. */
static void learn_peer_stop_reason(hvds_runtime_t* rt) {
  if (rt->store == NULL || rt->size <= 1 || atomic_load(&rt->shutdown_requested)) return;
  char key[256];
  void* val = NULL;
  size_t len = 0;
  snprintf(key, sizeof key, HVDS_KEY_GEN_STOP_FIRST, rt->job, rt->generation);
  if (hvds__store_get_within(rt->store, key, 0, HVDS_STORE_STOPPING_REPLY_MS, &val, &len) ==
      HVDS_SUCCESS)
    snprintf(rt->fatal, sizeof rt->fatal, "%.*s", (int)len, (const char*)val);
  free(val);
}

/* The coordinator's bursts are on every rank's critical path (thread_priority.h). */
static void raise_priority(hvds_runtime_t* rt) {
  char got[64], why[160];
  int rc = hvds__priority_raise_self((hvds_priority_mode_t)rt->coord_priority, got, sizeof got, why,
                                     sizeof why);
  __atomic_store_n(&rt->coord_level, hvds__priority_level(got), __ATOMIC_RELEASE);
  if (rc != 0 && rt->coord_priority == HVDS_PRIORITY_REALTIME)
    HVDS_WARN("coordinator thread of rank %d runs at %s: %s", rt->rank, got, why);
  else
    HVDS_DEBUG("coordinator thread of rank %d runs at %s%s%s", rt->rank, got, why[0] ? ": " : "",
               why);
}

void* hvds__coord_main(void* arg) {
  hvds_runtime_t* rt = arg;
  raise_priority(rt);
  long cycles = 0;
  double began = hvds__now();
  int result = coord_loop(rt, &cycles);
  hvds__cycle_drop_rest(rt); /* its entries are still pending: failed below */
  if (result >= 0) learn_peer_stop_reason(rt);
  atomic_store(&rt->shut_down, 1);
  HVDS_INFO("coordinator stopped after %ld cycles in %.1f s", cycles, hvds__now() - began);
  if (result < 0) {
    /* Make the peers fail now rather than at their timeout. */
    hvds__p2p_abort(rt->world);
    hvds__p2p_abort(rt->local); /* shared memory: its own segment, its own failure flag */
    hvds__coord_fail_all(rt, HVDS_REMOTE_ERROR, rt->fatal);
  } else {
    char message[1400];
    snprintf(message, sizeof message,
             "Horovod has been shut down. This was caused by an exception on one of the ranks or "
             "an attempt to allreduce, allgather or broadcast a tensor after one of the ranks "
             "finished execution.%s%s",
             rt->fatal[0] ? " " : "", rt->fatal);
    hvds__coord_fail_all(rt, HVDS_SHUT_DOWN, message);
  }
  return NULL;
}
