/* Lifecycle and queries of the public API: init, shutdown, identity, built features, errors,
 * timeline control. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "autotune.h"
#include "bootstrap.h"
#include "collectives.h"
#include "coordinator.h"
#include "cpu_budget.h"
#include "device_route.h"
#include "dtype.h"
#include "exec_shared.h"
#include "handle.h"
#include "instance.h"
#include "log.h"
#include "net_probe.h"
#include "p2p.h"
#include "param.h"
#include "process_set.h"
#include "result_text.h"
#include "state.h"
#include "store.h"
#include "store_keys.h"
#include "tcp_polling.h"
#include "thread_priority.h"
#include "timeline.h"
#include "transports.h"

hvds_runtime_t hvds__rt = {
    .life_mu = PTHREAD_MUTEX_INITIALIZER,
    .qmu = PTHREAD_MUTEX_INITIALIZER,
    .qcv = PTHREAD_COND_INITIALIZER,
    .hmu = PTHREAD_MUTEX_INITIALIZER,
    .hcv = PTHREAD_COND_INITIALIZER,
};


/* Polling beats sleeping only while no rank of this machine waits for a core (tcp_polling.h). */
static void set_transport_polling(hvds_runtime_t* rt) {
  hvds_cpu_budget_t cpu = hvds__cpu_budget();
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  int us = hvds__tcp_poll_us(hvds__param_int(HVDS_PARAM_TCP_POLL_US), rt->local_size,
                             rt->machine_ranks, cpu.cores, online);
  HVDS_DEBUG(
      "tcp waits poll %d us: %d ranks on this host, %d on this machine; %d cores usable "
      "(%d CPUs in the affinity mask, cgroup quota %.2f CPUs, 0 = none), %ld online",
      us, rt->local_size, rt->machine_ranks, cpu.cores, cpu.cpus, cpu.quota, online);
  const hvds_transport_t* tp = hvds__transport_find(hvds__param_str(HVDS_PARAM_TRANSPORT));
  if (tp != NULL && tp->set_poll_us) tp->set_poll_us(rt->world, us); /* views share it */
}

/* Horovod knobs this runtime does not act on are named, not silently dropped. */
static void warn_ignored_knob(const char* name, const char* value, const char* why) {
  HVDS_WARN("%s=%s has no effect in hvdsparse: %s", name, value, why);
}

hvds_result_t hvds_init_with_process_sets(const int32_t* ranks, const int32_t* sizes, int32_t n) {
  hvds_runtime_t* rt = &hvds__rt;
  if (hvds__forked_copy(rt)) return HVDS_SUCCESS;  // initialized, as a copy: queries answer
  pthread_mutex_lock(&rt->life_mu);
  if (atomic_load(&rt->initialized)) {
    pthread_mutex_unlock(&rt->life_mu);
    return HVDS_SUCCESS;
  }
  hvds__param_reload();
  atomic_store(&rt->shut_down, 0);
  atomic_store(&rt->shutdown_requested, 0);
  rt->fatal[0] = '\0';
  rt->stop_reason[0] = '\0';
  rt->generation++;
  hvds__instance_configure(rt);
  hvds_result_t rc = hvds__bootstrap(rt);
  if (rc == HVDS_SUCCESS) set_transport_polling(rt);
  if (rc == HVDS_SUCCESS) hvds__param_report_ignored(warn_ignored_knob); /* rank now known */
  if (rc == HVDS_SUCCESS) rc = hvds__autotune_init(rt);
  if (rc == HVDS_SUCCESS) rc = hvds__sparse_runtime_init(rt); /* network probe, ZEN seed */
  if (rc == HVDS_SUCCESS) rc = hvds__instance_install_sets(rt, ranks, sizes, n);
  const char* tl = hvds__param_str(HVDS_PARAM_TIMELINE);
  if (rc == HVDS_SUCCESS && tl && strcmp(tl, "DYNAMIC") != 0) {
    rt->timeline_request = strdup(tl);
    rt->timeline_request_marks = (int)hvds__param_int(HVDS_PARAM_TIMELINE_MARK_CYCLES);
    rt->timeline_pending = 1;
    rt->mark_cycles = rt->timeline_request_marks;
  }
  if (rc == HVDS_SUCCESS && pthread_create(&rt->thread, NULL, hvds__coord_main, rt) != 0)
    rc = hvds__set_error(HVDS_SYSTEM_ERROR, "cannot start the coordinator thread");
  if (rc != HVDS_SUCCESS) {
    hvds__instance_destroy_sets(rt);
    hvds__bootstrap_teardown(rt);
    pthread_mutex_unlock(&rt->life_mu);
    HVDS_ERROR("initialization failed: %s", hvds_last_error());
    return rc;
  }
  hvds__forked_copy_own(rt);
  atomic_store(&rt->initialized, 1);
  HVDS_INFO("hvdsparse initialized: rank %d of %d", rt->rank, rt->size);
  pthread_mutex_unlock(&rt->life_mu);
  return HVDS_SUCCESS;
}

hvds_result_t hvds_init(void) { return hvds_init_with_process_sets(NULL, NULL, 0); }

hvds_result_t hvds_set_shutdown_reason(const char* reason) {
  hvds_runtime_t* rt = &hvds__rt;
  if (hvds__forked_copy(rt)) return HVDS_SUCCESS;
  pthread_mutex_lock(&rt->life_mu);
  snprintf(rt->stop_reason, sizeof rt->stop_reason, "%s", reason ? reason : "");
  pthread_mutex_unlock(&rt->life_mu);
  return HVDS_SUCCESS;
}

hvds_result_t hvds_prefer_coordinator_priority(const char* mode) {
  int parsed = hvds__priority_mode_parse(mode);
  if (parsed < 0)
    return hvds__set_error(HVDS_INVALID_ARGUMENT,
                           "coordinator priority '%s' is not normal, auto or realtime",
                           mode ? mode : "(null)");
  hvds_runtime_t* rt = &hvds__rt;
  pthread_mutex_lock(&rt->life_mu);
  if (hvds__instance_prefer_priority(rt, parsed) && hvds_is_initialized()) {
    pthread_mutex_lock(&rt->qmu);  // the coordinator applies it at its next cycle
    hvds__coord_wake_locked(rt);
    pthread_mutex_unlock(&rt->qmu);
  }
  pthread_mutex_unlock(&rt->life_mu);
  return HVDS_SUCCESS;
}

/* The first rank that stops with a reason tells the job (the coordinator of a peer reads it),
 * before its peers learn that it stops. Not once the runtime has failed: its store may be out of
 * reach then, and the failure has its own explanation. */
static void publish_stop_reason(hvds_runtime_t* rt) {
  if (!rt->stop_reason[0] || rt->store == NULL || rt->size <= 1 || atomic_load(&rt->shut_down))
    return;
  char count[256], key[256], text[700];
  int n = snprintf(text, sizeof text, "Rank %d stopped first, %s.", rt->rank, rt->stop_reason);
  size_t len = n < (int)sizeof text ? (size_t)n : sizeof text - 1;
  snprintf(count, sizeof count, HVDS_KEY_GEN_STOP_COUNT, rt->job, rt->generation);
  snprintf(key, sizeof key, HVDS_KEY_GEN_STOP_FIRST, rt->job, rt->generation);
  if (!hvds__store_set_first(rt->store, count, key, text, len, HVDS_STORE_STOPPING_REPLY_MS))
    return;
  // The launcher's copy (it names the first worker to exit, which need not be this one).
  snprintf(count, sizeof count, HVDS_KEY_STOP_COUNT, rt->job);
  snprintf(key, sizeof key, HVDS_KEY_STOP_FIRST, rt->job);
  hvds__store_set_first(rt->store, count, key, text, len, HVDS_STORE_STOPPING_REPLY_MS);
}

hvds_result_t hvds_shutdown(void) {
  hvds_runtime_t* rt = &hvds__rt;
  if (hvds__forked_copy(rt)) return HVDS_SUCCESS;  // the parent's runtime is not ours to stop
  pthread_mutex_lock(&rt->life_mu);
  if (!atomic_load(&rt->initialized)) {
    pthread_mutex_unlock(&rt->life_mu);
    return HVDS_SUCCESS;
  }
  publish_stop_reason(rt);
  pthread_mutex_lock(&rt->qmu);
  atomic_store(&rt->shutdown_requested, 1);
  hvds__coord_wake_locked(rt);
  pthread_mutex_unlock(&rt->qmu);
  pthread_join(rt->thread, NULL);
  atomic_store(&rt->initialized, 0);
  rt->owner_pid = 0;
  hvds__device_comms_free(rt);  // waits for GPU work in flight, whose completions take qmu
  pthread_mutex_lock(&rt->qmu);
  hvds__instance_destroy_sets(rt);
  free(rt->timeline_request);
  rt->timeline_request = NULL;
  rt->timeline_pending = 0;
  pthread_mutex_unlock(&rt->qmu);
  hvds__timeline_close(rt->timeline);
  rt->timeline = NULL;
  hvds__bootstrap_teardown(rt);
  hvds__autotune_free(rt);
  hvds__fusion_buffer_free(rt);
  pthread_mutex_unlock(&rt->life_mu);
  return HVDS_SUCCESS;
}

int hvds_is_initialized(void) { return atomic_load(&hvds__rt.initialized); }

#define QUERY(fn, field) \
  int fn(void) { return atomic_load(&hvds__rt.initialized) ? hvds__rt.field : -1; }
QUERY(hvds_rank, rank)
QUERY(hvds_size, size)
QUERY(hvds_local_rank, local_rank)
QUERY(hvds_local_size, local_size)
QUERY(hvds_cross_rank, cross_rank)
QUERY(hvds_cross_size, cross_size)
QUERY(hvds_is_homogeneous, homogeneous)
#undef QUERY

/* What this build runs (CUDA and NCCL: device_support.c). */
int hvds_gloo_built(void) { return 1; }
int hvds_mpi_built(void) { return 0; }
int hvds_hwloc_built(void) {
#ifdef HVDS_HAVE_HWLOC
  return 1;
#else
  return 0;
#endif
}

hvds_result_t hvds_start_timeline(const char* path, int mark_cycles) {
  hvds_runtime_t* rt = &hvds__rt;
  if (hvds__forked_copy(rt)) return hvds__forked_error(rt, "start_timeline");
  if (!atomic_load(&rt->initialized))
    return hvds__set_error(HVDS_INVALID_USAGE, "Horovod has not been initialized; use hvd.init().");
  if (path == NULL || path[0] == '\0')
    return hvds__set_error(HVDS_INVALID_ARGUMENT, "start_timeline: a file path is required");
  pthread_mutex_lock(&rt->qmu);
  free(rt->timeline_request);
  rt->timeline_request = strdup(path);
  rt->timeline_request_marks = mark_cycles;
  rt->mark_cycles = mark_cycles;
  rt->timeline_pending = 1;
  hvds__coord_wake_locked(rt);
  pthread_mutex_unlock(&rt->qmu);
  return HVDS_SUCCESS;
}

hvds_result_t hvds_stop_timeline(void) {
  hvds_runtime_t* rt = &hvds__rt;
  if (hvds__forked_copy(rt)) return hvds__forked_error(rt, "stop_timeline");
  if (!atomic_load(&rt->initialized))
    return hvds__set_error(HVDS_INVALID_USAGE, "Horovod has not been initialized; use hvd.init().");
  pthread_mutex_lock(&rt->qmu);
  free(rt->timeline_request);
  rt->timeline_request = NULL;
  rt->timeline_pending = 1;
  hvds__coord_wake_locked(rt);
  pthread_mutex_unlock(&rt->qmu);
  return HVDS_SUCCESS;
}

size_t hvds_dtype_size(hvds_dtype_t dtype) { return hvds__dtype_bytes(dtype); }

const char* hvds_dtype_name(hvds_dtype_t dtype) { return hvds__dtype_name(dtype); }
