/* Process-set creation, negotiated registration and removal, and the public queries. */
#include "process_set.h"

#include <stdlib.h>
#include <string.h>

#include "device_route.h"
#include "exec_shared.h"
#include "handle.h"
#include "log.h"
#include "p2p.h"
#include "param.h"
#include "sparse_memory.h"
#include "sparse_rt.h"
#include "table.h"
#include "tags.h"

uint64_t hvds__next_tag(hvds_pset_t* s) { return s->tag_seq++ & HVDS_TAG_SEQ_MASK; }

static int cmp_int(const void* a, const void* b) {
  int32_t x = *(const int32_t*)a, y = *(const int32_t*)b;
  return (x > y) - (x < y);
}

hvds_pset_t* hvds__pset_create(hvds_runtime_t* rt, int32_t id, const int32_t* ranks, int32_t n) {
  hvds_pset_t* s = calloc(1, sizeof(*s));
  if (s == NULL) return NULL;
  s->rt = rt;
  s->id = id;
  s->ranks = malloc((size_t)n * sizeof(int32_t));
  s->joined_ranks = calloc((size_t)n, sizeof(int32_t));
  if (s->ranks == NULL || s->joined_ranks == NULL) goto fail;
  memcpy(s->ranks, ranks, (size_t)n * sizeof(int32_t));
  qsort(s->ranks, (size_t)n, sizeof(int32_t), cmp_int);
  s->n = n;
  s->my_rank = -1;
  for (int32_t i = 0; i < n; i++)
    if (s->ranks[i] == rt->rank) s->my_rank = i;
  s->last_joined = -1;
  hvds__cache_init(&s->cache, (int32_t)hvds__param_int(HVDS_PARAM_CACHE_CAPACITY));
  s->bit_entry = calloc((size_t)(s->cache.cap > 0 ? s->cache.cap : 1), sizeof(*s->bit_entry));
  if (s->bit_entry == NULL) goto fail;
  if (id == 0) {
    s->comm = rt->world;
  } else {
    int* r = malloc((size_t)n * sizeof(int));
    if (r == NULL) goto fail;
    for (int32_t i = 0; i < n; i++) r[i] = s->ranks[i];
    hvds_result_t rc =
        hvds__p2p_sub_create(rt->world, r, n, (uint16_t)(HVDS_SPACE_PSET_BASE + id), &s->comm);
    free(r);
    if (rc != HVDS_SUCCESS) goto fail;
  }
  return s;
fail:
  hvds__pset_destroy(s);
  return NULL;
}

void hvds__pset_destroy(hvds_pset_t* s) {
  if (s == NULL) return;
  hvds__device_comm_free(s);  // waits for its operations, whose completions need the set
  if (s->id != 0 && s->comm) hvds__p2p_destroy(s->comm);
  hvds__cache_free(&s->cache);
  free(s->bit_entry);
  hvds__table_clear(s);
  hvds__sparse_memory_clear(s);
  hvds__name_map_clear(&s->pending);
  hvds__name_map_clear(&s->inflight);
  free(s->ranks);
  free(s->joined_ranks);
  free(s);
}

static int32_t find_same(hvds_runtime_t* rt, const int32_t* ranks, int32_t n) {
  for (int32_t id = 0; id < HVDS_MAX_PROCESS_SETS; id++) {
    hvds_pset_t* s = rt->psets[id];
    if (s == NULL || s->marked_removed || s->n != n) continue;
    if (memcmp(s->ranks, ranks, (size_t)n * sizeof(int32_t)) == 0) return id;
  }
  return -1;
}

/* A removed set's id is given to the next set added, as Horovod does; ids stay below
 * next_ps_id, which the cycle's loops take as their bound. */
static int32_t lowest_free_id(const hvds_runtime_t* rt) {
  int32_t id = 1;
  while (id < rt->next_ps_id && rt->psets[id] != NULL) id++;
  return id;
}

hvds_result_t hvds__exec_ps_add(hvds_pset_t* g, hvds_response_t* r, hvds_exec_t* x) {
  hvds_runtime_t* rt = g->rt;
  int32_t n = r->nextra;
  int32_t* ranks = malloc((size_t)(n > 0 ? n : 1) * sizeof(int32_t));
  if (ranks == NULL) return HVDS_SYSTEM_ERROR;
  memcpy(ranks, r->extra, (size_t)n * sizeof(int32_t));
  qsort(ranks, (size_t)n, sizeof(int32_t), cmp_int);
  /* Every rank runs this at the same point, so ids agree everywhere. */
  pthread_mutex_lock(&rt->qmu);
  int32_t id = find_same(rt, ranks, n);
  pthread_mutex_unlock(&rt->qmu);
  const char* err = NULL;
  if (id < 0) {
    int32_t free_id = lowest_free_id(rt);
    if (free_id >= HVDS_MAX_PROCESS_SETS) {
      err = "add_process_set: too many process sets";
    } else {
      hvds_pset_t* s = hvds__pset_create(rt, free_id, ranks, n);
      if (s == NULL) {
        err = "add_process_set: out of memory";
      } else {
        id = free_id;
        if (id == rt->next_ps_id) rt->next_ps_id++;
        pthread_mutex_lock(&rt->qmu);
        rt->psets[id] = s;
        pthread_mutex_unlock(&rt->qmu);
      }
    }
  }
  free(ranks);
  hvds_entry_t* e = x->entries[0];
  if (e) {
    pthread_mutex_lock(&rt->hmu);
    e->handle->result_int = id;
    pthread_mutex_unlock(&rt->hmu);
    hvds__entry_finish(rt, e, err ? HVDS_SYSTEM_ERROR : HVDS_SUCCESS, err);
    x->entries[0] = NULL;
  }
  return HVDS_SUCCESS;
}

hvds_result_t hvds__exec_ps_remove(hvds_pset_t* g, hvds_response_t* r, hvds_exec_t* x) {
  hvds_runtime_t* rt = g->rt;
  int32_t id = r->root_rank;
  const char* err = NULL;
  pthread_mutex_lock(&rt->qmu);
  hvds_pset_t* s = (id > 0 && id < HVDS_MAX_PROCESS_SETS) ? rt->psets[id] : NULL;
  if (s == NULL)
    err = "remove_process_set: unknown process set";
  else if (s->q_head || s->pending.count)
    err = "remove_process_set: the set still has pending operations";
  else
    rt->psets[id] = NULL;
  pthread_mutex_unlock(&rt->qmu);
  if (err == NULL) hvds__pset_destroy(s);
  hvds_entry_t* e = x->entries[0];
  if (e) {
    hvds__entry_finish(rt, e, err ? HVDS_INVALID_ARGUMENT : HVDS_SUCCESS, err);
    x->entries[0] = NULL;
  }
  return HVDS_SUCCESS;
}
