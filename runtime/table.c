/* The set coordinator's message table: which rank asked for which tensor, readiness, and the
 * validation that turns disagreeing requests into Horovod's error messages. Set rank 0 only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller.h"
#include "log.h"
#include "sparse_rt.h"
#include "timeline.h"

#define rt hvds__rt

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

static void shape_text(const hvds_request_t* r, char* out, size_t len) {
  size_t off = (size_t)snprintf(out, len, "[");
  for (int32_t d = 0; d < r->ndim && off < len; d++)
    off += (size_t)snprintf(out + off, len - off, d ? ", %lld" : "%lld", (long long)r->shape[d]);
  if (off < len) snprintf(out + off, len - off, "]");
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

/* Compares every request with the first; writes Horovod's message on the first disagreement. */
static int validate(hvds_pset_t* s, hvds_table_rec_t* rec, char* err, size_t len) {
  const hvds_request_t* a = NULL;
  int ra = -1;
  for (int32_t r = 0; r < s->n; r++)
    if (rec->reqs[r].name) {
      a = &rec->reqs[r];
      ra = r;
      break;
    }
  const char* tn = hvds__msg_type_name(a->type);
  char sa[256], sb[256];
  for (int32_t r = ra + 1; r < s->n; r++) {
    const hvds_request_t* b = &rec->reqs[r];
    if (b->name == NULL) continue;
    int n = 0;
    if (b->type != a->type) {
      n = snprintf(err, len, "Mismatched operations: One rank did an %s, but another rank did an %s.",
                   tn, hvds__msg_type_name(b->type));
    } else if (b->dtype != a->dtype) {
      n = snprintf(err, len, "Mismatched data types: One rank had type %s, but another rank had type %s.",
                   hvds_dtype_name((hvds_dtype_t)a->dtype), hvds_dtype_name((hvds_dtype_t)b->dtype));
    } else if (b->device != a->device) {
      n = snprintf(err, len,
                   "Mismatched %s CPU/GPU device selection: One rank specified device %s, but "
                   "another rank specified device %s.",
                   tn, a->device < 0 ? "CPU" : "GPU", b->device < 0 ? "CPU" : "GPU");
    } else if (a->type == HVDS_MSG_ALLREDUCE || a->type == HVDS_MSG_BROADCAST ||
               a->type == HVDS_MSG_REDUCESCATTER || a->type == HVDS_MSG_SPARSE_ALLREDUCE) {
      int same = a->ndim == b->ndim;
      for (int32_t d = 0; same && d < a->ndim; d++) same = a->shape[d] == b->shape[d];
      if (!same) {
        shape_text(a, sa, sizeof(sa));
        shape_text(b, sb, sizeof(sb));
        n = snprintf(err, len,
                     "Mismatched %s tensor shapes: One rank sent a tensor of shape %s, but another "
                     "rank sent a tensor of shape %s.", tn, sa, sb);
      } else if (a->type != HVDS_MSG_BROADCAST &&
                 (a->prescale != b->prescale || a->postscale != b->postscale)) {
        n = snprintf(err, len,
                     "Mismatched prescale and/or postscale factors: One rank sent factors (%g, %g), "
                     "but another rank sent factors (%g, %g).",
                     a->prescale, a->postscale, b->prescale, b->postscale);
      } else if (a->type != HVDS_MSG_BROADCAST && a->reduce_op != b->reduce_op) {
        n = snprintf(err, len,
                     "Mismatched reduction operation: One rank sent reduction op %d, but another "
                     "rank sent reduction op %d.", a->reduce_op, b->reduce_op);
      } else if (a->type == HVDS_MSG_BROADCAST && a->root_rank != b->root_rank) {
        n = snprintf(err, len,
                     "Mismatched BROADCAST root ranks: One rank specified root rank %d, but another "
                     "rank specified root rank %d.", s->ranks[a->root_rank < s->n && a->root_rank >= 0 ? a->root_rank : 0],
                     s->ranks[b->root_rank < s->n && b->root_rank >= 0 ? b->root_rank : 0]);
      } else if (a->type == HVDS_MSG_SPARSE_ALLREDUCE) {
        n = hvds__sparse_validate(a, b, err, len);
      }
    } else if (a->type == HVDS_MSG_ALLGATHER || a->type == HVDS_MSG_ALLTOALL) {
      if (a->ndim != b->ndim) {
        n = snprintf(err, len,
                     "Mismatched %s tensor shapes: One rank sent a tensor of rank %d, but another "
                     "rank sent a tensor of rank %d.", tn, a->ndim, b->ndim);
      } else {
        for (int32_t d = 1; d < a->ndim && n == 0; d++)
          if (a->shape[d] != b->shape[d])
            n = snprintf(err, len,
                         "Mismatched %s tensor shapes: One rank sent a tensor with dimension %d "
                         "equal to %lld, but another rank sent a tensor with dimension %d equal "
                         "to %lld.", tn, d, (long long)a->shape[d], d, (long long)b->shape[d]);
      }
    } else if (a->type == HVDS_MSG_PS_ADD) {
      int same = a->nextra == b->nextra;
      for (int32_t i = 0; same && i < a->nextra; i++) same = a->extra[i] == b->extra[i];
      if (!same)
        n = snprintf(err, len, "Different ranks tried to add different process sets.");
    }
    if (n > 0) {
      snprintf(err + n, len - (size_t)n, " [tensor: %s; ranks %d and %d]", a->name,
               s->ranks[ra], s->ranks[r]);
      return -1;
    }
  }
  if (a->type == HVDS_MSG_SPARSE_ALLREDUCE) {
    int n = hvds__sparse_validate(a, NULL, err, len);
    if (n > 0) {
      snprintf(err + n, len - (size_t)n, " [tensor: %s]", a->name);
      return -1;
    }
  }
  if ((a->type == HVDS_MSG_ALLGATHER || a->type == HVDS_MSG_ALLTOALL ||
       a->type == HVDS_MSG_REDUCESCATTER) && a->ndim == 0) {
    snprintf(err, len, "Process-set rank zero tried to %s a rank-zero tensor. [tensor: %s]", tn,
             a->name);
    return -1;
  }
  if (s->joined_count > 0 && a->type != HVDS_MSG_ALLREDUCE && a->type != HVDS_MSG_BARRIER &&
      a->type != HVDS_MSG_SPARSE_ALLREDUCE &&
      a->type != HVDS_MSG_PS_ADD && a->type != HVDS_MSG_PS_REMOVE) {
    const char* what = a->type == HVDS_MSG_ALLGATHER
                           ? "Allgather is not supported with Join at this time. Specify "
                             "sparse_to_dense=True if using DistributedOptimizer"
                           : a->type == HVDS_MSG_ALLTOALL    ? "Alltoall is not supported with Join at this time."
                           : a->type == HVDS_MSG_BROADCAST   ? "Broadcast is not supported with Join at this time."
                                                             : "Reducescatter is not supported with Join at this time.";
    snprintf(err, len, "%s [tensor: %s]", what, a->name);
    return -1;
  }
  return 0;
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
static hvds_result_t construct(hvds_pset_t* s, const char* name, hvds_response_t** resps,
                               int32_t* nresps, int32_t* cap) {
  hvds_table_rec_t* rec = hvds__name_map_remove(&s->table, name);
  if (rec == NULL) return HVDS_SUCCESS;
  if (rt.timeline) hvds__timeline_negotiate_end(rt.timeline, name);
  hvds_response_t* out = hvds__resp_push(resps, nresps, cap);
  if (out == NULL) {
    record_free(rec, s->n);
    return HVDS_SYSTEM_ERROR;
  }
  char err[1024];
  const hvds_request_t* a = NULL;
  for (int32_t r = 0; r < s->n && a == NULL; r++)
    if (rec->reqs[r].name) a = &rec->reqs[r];
  int bad = validate(s, rec, err, sizeof(err)) != 0;
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
      if (rt.timeline) hvds__timeline_negotiate_start(rt.timeline, q->name, hvds__msg_type_name(q->type));
    }
    int32_t rank = q->rank;
    if (rec->reqs[rank].name != NULL) continue; /* a rank asks once per name; ignore repeats */
    rec->reqs[rank] = *q; /* take ownership */
    memset(q, 0, sizeof(*q));
    rec->count++;
    if (rt.timeline)
      hvds__timeline_negotiate_rank_ready(rt.timeline, rec->reqs[rank].name, s->ranks[rank]);
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
      if (rec->count >= needed(s)) ready[k++] = strdup(s->table.slots[i].key);
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
