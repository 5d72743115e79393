/* A runtime's state apart from how its world was connected (instance.h). */
#include "instance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives.h"
#include "coordinator.h"
#include "exec_shared.h"
#include "handle.h"
#include "log.h"
#include "param.h"
#include "process_set.h"
#include "thread_priority.h"
#include "transports.h"

/* The binding's preference (hvds_prefer_coordinator_priority); -1 when none. */
static int preferred_priority = -1;

/* How the coordinator thread is scheduled (thread_priority.h): the environment's setting, else
 * the binding's preference, else the default; a value not understood is reported and treated
 * as normal. */
static int coordinator_priority(void) {
  const char* text = hvds__param_str(HVDS_PARAM_COORDINATOR_PRIORITY);
  int preferred = __atomic_load_n(&preferred_priority, __ATOMIC_ACQUIRE);
  if (!hvds__param_is_set(HVDS_PARAM_COORDINATOR_PRIORITY) && preferred >= 0)
    text = hvds__priority_mode_name(preferred);
  int mode = hvds__priority_mode_parse(text);
  const hvds_transport_t* tp = hvds__transport_find(hvds__param_str(HVDS_PARAM_TRANSPORT));
  if (mode > 0 && tp != NULL && tp->own_threads) {
    /* Gloo's own threads carry the data: a real-time waiter would keep the core from them. */
    if (mode == HVDS_PRIORITY_REALTIME)
      HVDS_WARN(
          "HVDSPARSE_COORDINATOR_PRIORITY=realtime is not applied with the %s transport, "
          "whose own threads carry the data and would wait behind the coordinator",
          tp->name);
    return HVDS_PRIORITY_NORMAL;
  }
  if (mode >= 0) return mode;
  HVDS_WARN("HVDSPARSE_COORDINATOR_PRIORITY=%s is not normal, auto or realtime; using normal",
            text);
  return HVDS_PRIORITY_NORMAL;
}

int hvds__instance_prefer_priority(hvds_runtime_t* rt, int mode) {
  __atomic_store_n(&preferred_priority, mode, __ATOMIC_RELEASE);
  int applied = coordinator_priority();
  if (applied == rt->coord_priority) return 0;
  __atomic_store_n(&rt->coord_priority_pending, applied, __ATOMIC_RELEASE);
  return 1;
}

void hvds__instance_configure(hvds_runtime_t* rt) {
  rt->cycle_ms = hvds__param_dbl(HVDS_PARAM_CYCLE_TIME);
  rt->spin_us = hvds__param_dbl(HVDS_PARAM_SPIN_US);
  rt->coord_priority = coordinator_priority();
  __atomic_store_n(&rt->coord_priority_pending, -1, __ATOMIC_RELEASE);
  __atomic_store_n(&rt->coord_level, 0, __ATOMIC_RELEASE); /* the coordinator sets what it got */
  rt->caller_runs = hvds__param_int(HVDS_PARAM_CALLER_RUNS) > 0;
  rt->sparse_learn_costs = hvds__param_int(HVDS_PARAM_SPARSE_LEARN_COSTS) != 0;
  rt->cycle_owned = 0;
  rt->cycle_result = 0;
  rt->last_cycle_start = 0;
  /* Knobs the hot path reads, once per init rather than once per operation. */
  const char* algo = hvds__param_str(HVDS_PARAM_ALLREDUCE_ALGORITHM);
  rt->allreduce_algo = hvds__allreduce_algo_from_name(algo);
  if (rt->allreduce_algo == HVDS_ALGO_COUNT) {
    HVDS_WARN("unknown HVDSPARSE_ALLREDUCE_ALGORITHM '%s' (ring, rhd or auto): choosing by size",
              algo);
    rt->allreduce_algo = HVDS_ALGO_AUTO;
  }
  rt->rhd_max_bytes = hvds__param_int(HVDS_PARAM_RHD_MAX_BYTES);
  rt->ring_chunk_bytes = hvds__param_int(HVDS_PARAM_RING_CHUNK_BYTES);
  rt->stall_check_s = hvds__param_dbl(HVDS_PARAM_STALL_CHECK_TIME_SECONDS);
  rt->stall_check_disabled = hvds__param_int(HVDS_PARAM_STALL_CHECK_DISABLE) > 0;
  rt->deadlock_s = hvds__param_dbl(HVDS_PARAM_DEADLOCK_SHUTDOWN_SECONDS);
  rt->last_completion = hvds__now();
  rt->idle_sleep_cycles = (int)hvds__param_int(HVDS_PARAM_IDLE_SLEEP_CYCLES);
  rt->idle_cycles = 0;
  rt->world_epoch = 0;
  rt->machine_ranks = 0; /* bootstrap counts them when there are peers */
  rt->fusion_threshold = hvds__param_int(HVDS_PARAM_FUSION_THRESHOLD);
}

/* Installs the sets: the global one, then any static ones given at init. */
hvds_result_t hvds__instance_install_sets(hvds_runtime_t* rt, const int32_t* ranks,
                                          const int32_t* sizes, int32_t n) {
  int32_t* all = malloc((size_t)rt->size * sizeof(int32_t));
  if (all == NULL) return hvds__set_error(HVDS_SYSTEM_ERROR, "out of memory");
  for (int32_t r = 0; r < rt->size; r++) all[r] = r;
  rt->psets[0] = hvds__pset_create(rt, 0, all, rt->size);
  free(all);
  if (rt->psets[0] == NULL)
    return hvds__set_error(HVDS_SYSTEM_ERROR, "creating the global set failed");
  rt->next_ps_id = 1;
  const int32_t* p = ranks;
  for (int32_t i = 0; i < n; i++) {
    for (int32_t k = 0; k < sizes[i]; k++)
      if (p[k] < 0 || p[k] >= rt->size)
        return hvds__set_error(HVDS_INVALID_ARGUMENT, "process set %d: rank %d outside 0..%d",
                               i + 1, p[k], rt->size - 1);
    hvds_pset_t* s = hvds__pset_create(rt, rt->next_ps_id, p, sizes[i]);
    if (s == NULL) return hvds__set_error(HVDS_SYSTEM_ERROR, "creating process set %d failed", i + 1);
    rt->psets[rt->next_ps_id++] = s;
    p += sizes[i];
  }
  return HVDS_SUCCESS;
}

void hvds__instance_destroy_sets(hvds_runtime_t* rt) {
  for (int32_t id = 0; id < HVDS_MAX_PROCESS_SETS; id++) {
    hvds__pset_destroy(rt->psets[id]);
    rt->psets[id] = NULL;
  }
}

hvds_result_t hvds__instance_open(hvds_runtime_t* rt, hvds_p2p_t* world) {
  memset(rt, 0, sizeof *rt);
  pthread_mutex_init(&rt->life_mu, NULL);
  pthread_mutex_init(&rt->qmu, NULL);
  pthread_cond_init(&rt->qcv, NULL);
  pthread_mutex_init(&rt->hmu, NULL);
  pthread_cond_init(&rt->hcv, NULL);
  rt->world = world;
  rt->rank = rt->cross_rank = world->rank;
  rt->size = rt->cross_size = world->size;
  rt->local_rank = 0;
  rt->local_size = 1;
  rt->homogeneous = 1;
  snprintf(rt->job, sizeof rt->job, "instance");
  hvds__instance_configure(rt);
  hvds_result_t rc = hvds__instance_install_sets(rt, NULL, NULL, 0);
  if (rc != HVDS_SUCCESS) {
    hvds__instance_close(rt);
    return rc;
  }
  atomic_store(&rt->initialized, 1);
  return HVDS_SUCCESS;
}

hvds_result_t hvds__instance_start(hvds_runtime_t* rt) {
  if (pthread_create(&rt->thread, NULL, hvds__coord_main, rt) != 0)
    return hvds__set_error(HVDS_SYSTEM_ERROR, "cannot start the coordinator thread");
  rt->started = 1;
  return HVDS_SUCCESS;
}

void hvds__instance_stop(hvds_runtime_t* rt) {
  if (!rt->started) return;
  pthread_mutex_lock(&rt->qmu);
  atomic_store(&rt->shutdown_requested, 1);
  hvds__coord_wake_locked(rt);
  pthread_mutex_unlock(&rt->qmu);
  pthread_join(rt->thread, NULL);
  rt->started = 0;
}

void hvds__instance_close(hvds_runtime_t* rt) {
  hvds__instance_stop(rt);
  atomic_store(&rt->initialized, 0);
  hvds__instance_destroy_sets(rt);
  hvds__handle_table_free(rt);
  hvds__fusion_buffer_free(rt);
  pthread_cond_destroy(&rt->hcv);
  pthread_mutex_destroy(&rt->hmu);
  pthread_cond_destroy(&rt->qcv);
  pthread_mutex_destroy(&rt->qmu);
  pthread_mutex_destroy(&rt->life_mu);
}
