/* The set coordinator's message table: which rank asked for which tensor, and the responses of
 * the tensors every rank asked for (validated by validate.c). Set rank 0 only. */
#include "table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "sparse_rt.h"
#include "timeline.h"
#include "validate.h"

hvds_response_t* hvds__resp_push(hvds_response_t** resps, int32_t* n, int32_t* cap) {
  if (*n == *cap) {
    int32_t c = *cap ? *cap * 2 : 16;
    hvds_response_t* r = realloc(*resps, (size_t)c * sizeof(*r));
    if (r == NULL) return NULL;
    *resps = r;
    *cap = c;
  }
  hvds_response_t* slot = &(*resps)[(*n)++];
  memset(slot, 0, sizeof(*slot));
  slot->last_joined_rank = -1;
  return slot;
}

static void record_free(hvds_table_rec_t* rec, int32_t n) {
  if (rec == NULL) return;
  for (int32_t i = 0; i < n; i++) hvds__request_free(&rec->reqs[i]);
  free(rec->reqs);
  free(rec);
}

void hvds__table_clear(hvds_pset_t* s) {
  for (size_t i = 0; i < s->table.cap; i++)
    if (hvds__name_map_live(&s->table, i)) record_free(s->table.slots[i].value, s->n);
  hvds__name_map_clear(&s->table);
}

static int64_t numel(const hvds_request_t* r) {
  int64_t n = 1;
  for (int32_t d = 0; d < r->ndim; d++) n *= r->shape[d];
  return n;
}

static int copy_shape(hvds_response_t* out, const hvds_request_t* a) {
  out->extra = malloc((size_t)(a->ndim > 0 ? a->ndim : 1) * sizeof(int32_t));
  if (out->extra == NULL) return -1;
  for (int32_t d = 0; d < a->ndim; d++) out->extra[d] = (int32_t)a->shape[d];
  out->nextra = a->ndim;
  return 0;
}

/* Builds the response for a ready name and drops its record. */
/* The first rank's request in rec, or NULL when none has asked. */
static const hvds_request_t* first_request(const hvds_table_rec_t* rec, int32_t n) {
  for (int32_t r = 0; r < n; r++)
    if (rec->reqs[r].name) return &rec->reqs[r];
  return NULL;
}

static hvds_result_t construct(hvds_pset_t* s, const char* name, hvds_response_t** resps,
                               int32_t* nresps, int32_t* cap) {
  hvds_runtime_t* rt = s->rt;
  hvds_table_rec_t* rec = hvds__name_map_remove(&s->table, name);
  if (rec == NULL) return HVDS_SUCCESS;
  if (rt->timeline) hvds__timeline_negotiate_end(rt->timeline, name);
  hvds_response_t* out = hvds__resp_push(resps, nresps, cap);
  if (out == NULL) {
    record_free(rec, s->n);
    return HVDS_SYSTEM_ERROR;
  }
  char err[1024];
  const hvds_request_t* a = first_request(rec, s->n);
  int bad = hvds__validate_requests(s, rec, err, sizeof(err)) != 0;
  out->type = bad ? HVDS_MSG_ERROR : a->type;
  out->dtype = a->dtype;
  out->reduce_op = a->reduce_op;
  out->root_rank = a->root_rank;
  out->device = a->device;
  out->prescale = a->prescale;
  out->postscale = a->postscale;
  int oom = hvds__response_add_name(out, name) != 0;
  if (bad) {
    out->error = strdup(err);
    oom |= out->error == NULL;
  } else if (a->type == HVDS_MSG_ALLGATHER) {
    for (int32_t r = 0; r < s->n && !oom; r++)
      oom |= hvds__response_add_size(out, rec->reqs[r].name ? rec->reqs[r].shape[0] : 0) != 0;
    oom |= copy_shape(out, a) != 0;
  } else if (a->type == HVDS_MSG_ALLTOALL || a->type == HVDS_MSG_REDUCESCATTER) {
    oom |= hvds__response_add_size(out, numel(a)) != 0;
    oom |= copy_shape(out, a) != 0;
  } else if (a->type == HVDS_MSG_SPARSE_ALLREDUCE) {
    oom |= hvds__sparse_response_fill(out, a) != 0;
  } else if (a->type == HVDS_MSG_PS_ADD) {
    out->extra = malloc((size_t)a->nextra * sizeof(int32_t));
    oom |= out->extra == NULL;
    if (out->extra) {
      memcpy(out->extra, a->extra, (size_t)a->nextra * sizeof(int32_t));
      out->nextra = a->nextra;
    }
  } else {
    oom |= hvds__response_add_size(out, numel(a)) != 0;
  }
  record_free(rec, s->n);
  return oom ? HVDS_SYSTEM_ERROR : HVDS_SUCCESS;
}

static int32_t needed(const hvds_pset_t* s) { return s->n - s->joined_count; }

hvds_result_t hvds__table_add(hvds_pset_t* s, hvds_request_t* reqs, int32_t n,
                              hvds_response_t** resps, int32_t* nresps, int32_t* cap) {
  hvds_runtime_t* rt = s->rt;
  for (int32_t i = 0; i < n; i++) {
    hvds_request_t* q = &reqs[i];
    if (q->rank < 0 || q->rank >= s->n || q->name == NULL) continue;
    if (q->type == HVDS_MSG_JOIN) {
      if (!s->joined_ranks[q->rank]) {
        s->joined_ranks[q->rank] = 1;
        s->joined_count++;
      }
      s->last_joined = s->ranks[q->rank];
      continue;
    }
    hvds_table_rec_t* rec = hvds__name_map_get(&s->table, q->name);
    if (rec == NULL) {
      rec = calloc(1, sizeof(*rec));
      if (rec) rec->reqs = calloc((size_t)s->n, sizeof(hvds_request_t));
      if (rec == NULL || rec->reqs == NULL || hvds__name_map_put(&s->table, q->name, rec) != 0) {
        if (rec) free(rec->reqs);
        free(rec);
        return HVDS_SYSTEM_ERROR;
      }
      rec->first_seen = hvds__now();
      if (rt->timeline)
        hvds__timeline_negotiate_start(rt->timeline, q->name, hvds__msg_type_name(q->type));
    }
    int32_t rank = q->rank;
    if (rec->reqs[rank].name != NULL) continue; /* a rank asks once per name; ignore repeats */
    rec->reqs[rank] = *q; /* take ownership */
    memset(q, 0, sizeof(*q));
    rec->count++;
    if (rt->timeline)
      hvds__timeline_negotiate_rank_ready(rt->timeline, rec->reqs[rank].name, s->ranks[rank]);
    if (rec->count >= needed(s)) {
      /* construct() frees the record and its names; keep our own copy of the key. */
      char* key = strdup(rec->reqs[rank].name);
      if (key == NULL) return HVDS_SYSTEM_ERROR;
      hvds_result_t rc = construct(s, key, resps, nresps, cap);
      free(key);
      if (rc != HVDS_SUCCESS) return rc;
    }
  }
  return HVDS_SUCCESS;
}

/* Names sorted for a deterministic order when joins make several ready at once. */
static int cmp_str(const void* a, const void* b) {
  return strcmp(*(const char* const*)a, *(const char* const*)b);
}

hvds_result_t hvds__table_finish(hvds_pset_t* s, hvds_response_t** resps, int32_t* nresps,
                                 int32_t* cap) {
  if (s->joined_count > 0 && s->table.count > 0) {
    size_t k = 0;
    char** ready = calloc(s->table.count, sizeof(char*));
    if (ready == NULL) return HVDS_SYSTEM_ERROR;
    for (size_t i = 0; i < s->table.cap; i++) {
      if (!hvds__name_map_live(&s->table, i)) continue;
      hvds_table_rec_t* rec = s->table.slots[i].value;
      /* An operation Join refuses fails now, from whichever ranks asked: the joined rank cannot
       * take part before every rank joins, and unnamed operations of ranks that joined in a
       * different order carry different names, so waiting for all of them could last forever. */
      const hvds_request_t* any = first_request(rec, s->n);
      if (rec->count >= needed(s) || (any && hvds__join_refuses(any->type)))
        ready[k++] = strdup(s->table.slots[i].key);
    }
    qsort(ready, k, sizeof(char*), cmp_str);
    hvds_result_t rc = HVDS_SUCCESS;
    for (size_t i = 0; i < k; i++) {
      if (ready[i] && rc == HVDS_SUCCESS) rc = construct(s, ready[i], resps, nresps, cap);
      free(ready[i]);
    }
    free(ready);
    if (rc != HVDS_SUCCESS) return rc;
  }
  if (s->joined_count > 0 && s->joined_count == s->n) {
    hvds_response_t* j = hvds__resp_push(resps, nresps, cap);
    if (j == NULL || hvds__response_add_name(j, "join.noname") != 0) return HVDS_SYSTEM_ERROR;
    j->type = HVDS_MSG_JOIN;
    j->last_joined_rank = s->last_joined;
    memset(s->joined_ranks, 0, (size_t)s->n * sizeof(int32_t));
    s->joined_count = 0;
  }
  return HVDS_SUCCESS;
}
