/* Waking the coordinator: the work flag, its condition variable and, while every rank sleeps
 * on it, the doorbell. Called with rt->qmu held from every layer that hands the coordinator
 * work, so it lives beneath them all. */
#include "p2p.h"
#include "state.h"

void hvds__coord_wake_locked(hvds_runtime_t* rt) {
  // Atomic store: wait_local(rt) and grace_for_callers(hvds_runtime_t* rt) read wake without qmu.
  __atomic_store_n(&rt->wake, 1, __ATOMIC_RELEASE);
  if (rt->coord_sleeping) pthread_cond_signal(&rt->qcv);
  if (rt->coord_bell_sleeping) hvds__p2p_bell_interrupt(rt->world);
}

void hvds__coord_wake_lazy_locked(hvds_runtime_t* rt) {
  if (rt->coord_sleeps_forever || rt->coord_bell_sleeping) {
    hvds__coord_wake_locked(rt);
    return;
  }
  /* The coordinator looks at its deadline, a cycle time at most, if the thread does not. */
  __atomic_store_n(&rt->wake, 1, __ATOMIC_RELEASE);
}
