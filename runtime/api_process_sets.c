/* The public process-set queries (hvdsparse.h) on the process's runtime: a set's rank, size,
 * members, and which sets exist. */
#include <string.h>

#include "state.h"

static hvds_pset_t* lookup_locked(hvds_runtime_t* rt, int32_t id) {
  if (id < 0 || id >= HVDS_MAX_PROCESS_SETS || !atomic_load(&rt->initialized)) return NULL;
  return rt->psets[id];
}

static int rank_of(const hvds_pset_t* s) { return s->my_rank; }
static int size_of(const hvds_pset_t* s) { return s->n; }
static int includes_me(const hvds_pset_t* s) { return s->my_rank >= 0; }

/* what(set) under the table's lock; -1 for an id that names no set. */
static int query(int32_t id, int (*what)(const hvds_pset_t*)) {
  hvds_runtime_t* rt = &hvds__rt;
  pthread_mutex_lock(&rt->qmu);
  hvds_pset_t* s = lookup_locked(rt, id);
  int r = s ? what(s) : -1;
  pthread_mutex_unlock(&rt->qmu);
  return r;
}

int hvds_process_set_rank(int32_t id) { return query(id, rank_of); }

int hvds_process_set_size(int32_t id) { return query(id, size_of); }

int hvds_process_set_included(int32_t id) { return query(id, includes_me); }

int32_t hvds_process_set_ranks(int32_t id, int32_t* ranks) {
  hvds_runtime_t* rt = &hvds__rt;
  pthread_mutex_lock(&rt->qmu);
  hvds_pset_t* s = lookup_locked(rt, id);
  int32_t n = s ? s->n : -1;
  if (s && ranks) memcpy(ranks, s->ranks, (size_t)n * sizeof(int32_t));
  pthread_mutex_unlock(&rt->qmu);
  return n;
}

int32_t hvds_number_of_process_sets(void) { return hvds_process_set_ids(NULL); }

int32_t hvds_process_set_ids(int32_t* ids) {
  hvds_runtime_t* rt = &hvds__rt;
  int32_t n = 0;
  pthread_mutex_lock(&rt->qmu);
  for (int32_t id = 0; id < HVDS_MAX_PROCESS_SETS; id++) {
    hvds_pset_t* s = lookup_locked(rt, id);
    if (s == NULL) continue;
    if (ids) ids[n] = id;
    n++;
  }
  pthread_mutex_unlock(&rt->qmu);
  return n;
}
