/* Response cache: slots with LRU eviction and a name index. */
#include "response_cache.h"

#include <stdlib.h>
#include <string.h>

void hvds__cache_init(hvds_cache_t* c, int32_t capacity) {
  memset(c, 0, sizeof(*c));
  if (capacity <= 0) return;
  c->entries = calloc((size_t)capacity, sizeof(*c->entries));
  if (c->entries != NULL) c->cap = capacity;
}

void hvds__cache_free(hvds_cache_t* c) {
  for (int32_t i = 0; i < c->cap; i++) {
    free(c->entries[i].name);
    free(c->entries[i].sizes);
  }
  free(c->entries);
  hvds__name_map_clear(&c->index);
  memset(c, 0, sizeof(*c));
}

static int32_t slot_of(const hvds_cache_t* c, const char* name) {
  intptr_t v = (intptr_t)hvds__name_map_get(&c->index, name);
  return v ? (int32_t)(v - 1) : -1;
}

static int cacheable(int32_t type) {
  return type == HVDS_MSG_ALLREDUCE || type == HVDS_MSG_REDUCESCATTER ||
         type == HVDS_MSG_ALLGATHER;
}

/* The dimensions of req after the first equal the cached shape's (from `from` on). */
static int same_shape(const hvds_cache_entry_t* e, const hvds_request_t* req, int32_t from) {
  if (e->nextra != req->ndim) return 0;
  for (int32_t d = from; d < req->ndim; d++)
    if (e->extra[d] != req->shape[d]) return 0;
  return 1;
}

hvds_cache_state_t hvds__cache_lookup(const hvds_cache_t* c, const hvds_request_t* req,
                                      int32_t* bit) {
  *bit = -1;
  if (c->cap == 0 || !cacheable(req->type)) return HVDS_CACHE_MISS;
  int32_t s = slot_of(c, req->name);
  if (s < 0) return HVDS_CACHE_MISS;
  *bit = s;
  const hvds_cache_entry_t* e = &c->entries[s];
  int64_t numel = 1;
  for (int32_t d = 0; d < req->ndim; d++) numel *= req->shape[d];
  int same = e->type == req->type && e->dtype == req->dtype && e->device == req->device;
  if (req->type == HVDS_MSG_ALLGATHER) {
    same = same && same_shape(e, req, 1) && req->rank >= 0 && req->rank < e->nsizes &&
           req->ndim > 0 && e->sizes[req->rank] == req->shape[0];
  } else {
    same = same && e->reduce_op == req->reduce_op && e->prescale == req->prescale &&
           e->postscale == req->postscale && e->numel == numel;
    if (req->type == HVDS_MSG_REDUCESCATTER) same = same && same_shape(e, req, 0);
  }
  return same ? HVDS_CACHE_HIT : HVDS_CACHE_INVALID;
}

static int32_t victim(const hvds_cache_t* c) {
  int32_t best = 0;
  for (int32_t i = 0; i < c->cap; i++) {
    if (c->entries[i].name == NULL) return i;
    if (c->entries[i].last_used < c->entries[best].last_used) best = i;
  }
  return best;
}

int32_t hvds__cache_put(hvds_cache_t* c, const hvds_response_t* resp, int32_t i) {
  if (c->cap == 0 || !cacheable(resp->type) || i >= resp->nnames || i >= resp->nsizes ||
      resp->nextra > HVDS_MAX_DIMS)
    return -1;
  int64_t* sizes = NULL;
  if (resp->type != HVDS_MSG_ALLREDUCE) {
    sizes = malloc((size_t)(resp->nsizes > 0 ? resp->nsizes : 1) * sizeof(int64_t));
    if (sizes == NULL) return -1;
    memcpy(sizes, resp->sizes, (size_t)resp->nsizes * sizeof(int64_t));
  }
  const char* name = resp->names[i];
  int32_t s = slot_of(c, name);
  if (s < 0) {
    s = victim(c);
    if (c->entries[s].name != NULL) hvds__cache_erase(c, s);
    char* copy = strdup(name);
    if (copy == NULL || hvds__name_map_put(&c->index, name, (void*)(intptr_t)(s + 1)) != 0) {
      free(copy);
      free(sizes);
      return -1;
    }
    c->entries[s].name = copy;
  }
  hvds_cache_entry_t* e = &c->entries[s];
  e->type = resp->type;
  e->dtype = resp->dtype;
  e->reduce_op = resp->reduce_op;
  e->device = resp->device;
  e->prescale = resp->prescale;
  e->postscale = resp->postscale;
  e->numel = resp->sizes[i];
  free(e->sizes);
  e->sizes = sizes;
  e->nsizes = sizes ? resp->nsizes : 0;
  e->nextra = sizes ? resp->nextra : 0;
  for (int32_t d = 0; d < e->nextra; d++) e->extra[d] = resp->extra[d];
  e->last_used = ++c->tick;
  return s;
}

void hvds__cache_touch(hvds_cache_t* c, int32_t bit) {
  if (bit >= 0 && bit < c->cap && c->entries[bit].name) c->entries[bit].last_used = ++c->tick;
}

void hvds__cache_erase(hvds_cache_t* c, int32_t bit) {
  if (bit < 0 || bit >= c->cap || c->entries[bit].name == NULL) return;
  hvds__name_map_remove(&c->index, c->entries[bit].name);
  free(c->entries[bit].name);
  free(c->entries[bit].sizes);
  memset(&c->entries[bit], 0, sizeof(c->entries[bit]));
}

const hvds_cache_entry_t* hvds__cache_get(const hvds_cache_t* c, int32_t bit) {
  if (bit < 0 || bit >= c->cap || c->entries[bit].name == NULL) return NULL;
  return &c->entries[bit];
}

int hvds__cache_response(const hvds_cache_t* c, int32_t bit, hvds_response_t* out) {
  const hvds_cache_entry_t* e = hvds__cache_get(c, bit);
  memset(out, 0, sizeof(*out));
  if (e == NULL) return -1;
  out->type = e->type;
  out->dtype = e->dtype;
  out->reduce_op = e->reduce_op;
  out->device = e->device;
  out->prescale = e->prescale;
  out->postscale = e->postscale;
  out->last_joined_rank = -1;
  int oom = hvds__response_add_name(out, e->name) != 0;
  if (e->sizes == NULL) {
    oom |= hvds__response_add_size(out, e->numel) != 0;
  } else {
    for (int32_t i = 0; i < e->nsizes && !oom; i++) oom |= hvds__response_add_size(out, e->sizes[i]) != 0;
    out->extra = malloc((size_t)(e->nextra > 0 ? e->nextra : 1) * sizeof(int32_t));
    oom |= out->extra == NULL;
    if (out->extra) {
      memcpy(out->extra, e->extra, (size_t)e->nextra * sizeof(int32_t));
      out->nextra = e->nextra;
    }
  }
  if (oom) {
    hvds__response_free(out);
    return -1;
  }
  return 0;
}
