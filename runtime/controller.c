/* One negotiation cycle: pop new entries, the bit-vector fast path, the slow path through the
 * set's rank 0, cache updates, fusion. */
#include "controller.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "check.h"
#include "collectives.h"
#include "dtype.h"
#include "fusion.h"
#include "handle.h"
#include "lane.h"
#include "log.h"
#include "p2p.h"
#include "process_set.h"
#include "reduce.h"
#include "sparse_rt.h"
#include "stall.h"
#include "table.h"

/* Flag bits of word 0 are inverted ("1 = not the case") so that AND yields "any rank". */
#define FLAG_NO_SHUTDOWN 1ull
#define FLAG_NO_UNCACHED 2ull
#define FLAG_NO_INVALID 4ull
#define FLAG_NO_PENDING 8ull /* this rank has nothing queued or waiting */
#define FLAG_NO_JOINED 16ull
/* Not inverted: AND yields "every rank". */
#define FLAG_STUCK 32ull /* blocked in a wait past the deadlock time, nothing finishing */

/* The bit vectors of caches up to this many slots (the default capacity) live on the stack. */
#define STACK_CACHE_SLOTS 1024

static void entry_to_request(const hvds_pset_t* s, const hvds_entry_t* e, hvds_request_t* r) {
  memset(r, 0, sizeof(*r));
  r->rank = s->my_rank;
  r->type = e->type;
  r->dtype = e->input.dtype;
  r->root_rank = e->root_rank;
  r->device = hvds__device_class(e->input.device);
  r->reduce_op = e->op;
  r->prescale = e->prescale;
  r->postscale = e->postscale;
  r->ndim = e->input.ndim;
  memcpy(r->shape, e->input.shape, sizeof(r->shape));
  r->name = e->name; /* borrowed; never freed through r */
  if (e->type == HVDS_MSG_PS_ADD) {
    r->extra = e->ps_ranks;
    r->nextra = e->ps_nranks;
  }
  if (e->type == HVDS_MSG_SPARSE_ALLREDUCE) { /* borrowed, as the name */
    r->extra = (int32_t*)e->sparse_meta;
    r->nextra = HVDS_SPARSE_META_COUNT;
  }
}

/* The request for e and its cache state; *bit is its slot when cached. */
static hvds_cache_state_t classify(const hvds_pset_t* s, const hvds_entry_t* e, hvds_request_t* r,
                                   int32_t* bit) {
  entry_to_request(s, e, r);
  return hvds__cache_lookup(&s->cache, r, bit);
}

/* Moves newly queued entries into the pending table. */
static void pop_queue(hvds_pset_t* s) {
  hvds_runtime_t* rt = s->rt;
  pthread_mutex_lock(&rt->qmu);
  hvds_entry_t* e = s->q_head;
  s->q_head = s->q_tail = NULL;
  pthread_mutex_unlock(&rt->qmu);
  while (e) {
    hvds_entry_t* next = e->next;
    e->next = NULL;
    if (e->type == HVDS_MSG_JOIN) s->join_entry = e;
    hvds__name_map_put(&s->pending, e->name, e);
    if (e->ordered) hvds__lane_push(s, e);
    e = next;
  }
}

/* Whether this rank has anything queued or waiting. For the global set every set counts, so
 * the global flags tell every rank whether the whole job is idle. */
static int has_work(const hvds_pset_t* s) {
  hvds_runtime_t* rt = s->rt;
  if (s->pending.count || s->joined) return 1;
  if (s->id != 0) return 0;
  int any = 0;
  pthread_mutex_lock(&rt->qmu);
  for (int32_t id = 0; id < rt->next_ps_id && !any; id++) { /* every set's id is below */
    const hvds_pset_t* o = rt->psets[id];
    any = o && (o->q_head || o->pending.count || o->joined);
  }
  pthread_mutex_unlock(&rt->qmu);
  return any;
}

/* Slow path, steps 1 and 2: every rank's encoded requests (b) to the set's rank 0, their lengths
 * first. On rank 0 *all holds them back to back, rank r's sizes[r] bytes; elsewhere *all stays
 * NULL. */
static hvds_result_t gather_requests(hvds_pset_t* s, const hvds_buf_t* b, uint8_t** all,
                                     size_t* sizes) {
  hvds_coll_opts_t o = {hvds__next_tag(s), HVDS_ALGO_AUTO, 0, 0};
  uint64_t* lens = calloc((size_t)s->n, sizeof(uint64_t));
  if (lens == NULL) return HVDS_SYSTEM_ERROR;
  for (int32_t r = 0; r < s->n; r++) sizes[r] = sizeof(uint64_t);
  uint64_t my_len = b->len;
  lens[s->my_rank] = my_len;
  hvds_result_t rc = hvds__gatherv(s->comm, &my_len, lens, sizes, 0, &o);
  if (rc == HVDS_SUCCESS && s->my_rank == 0) {
    size_t total = 0;
    for (int32_t r = 0; r < s->n; r++) total += (sizes[r] = (size_t)lens[r]);
    *all = malloc(total ? total : 1);
    if (*all == NULL) rc = HVDS_SYSTEM_ERROR;
  } else {
    sizes[s->my_rank] = b->len;
  }
  free(lens);
  o.tag = hvds__next_tag(s);
  if (rc == HVDS_SUCCESS) rc = hvds__gatherv(s->comm, b->data, *all, sizes, 0, &o);
  return rc;
}

/* Slow path, step 3, at the set's rank 0: the table takes every rank's requests and answers with
 * the responses of the tensors every rank has now asked for, the stall inspector's errors among
 * them, encoded into rb. A malformed message is dropped (its rank then shows as stalled). */
static hvds_result_t decide(hvds_pset_t* s, const uint8_t* all, const size_t* sizes,
                            hvds_buf_t* rb) {
  hvds_response_t* resps = NULL;
  int32_t nresps = 0, cap = 0;
  hvds_result_t rc = HVDS_SUCCESS;
  size_t off = 0;
  for (int32_t r = 0; r < s->n && rc == HVDS_SUCCESS; off += sizes[r], r++) {
    hvds_request_t* reqs = NULL;
    int32_t n = 0, flags = 0;
    if (hvds__decode_requests(all + off, sizes[r], &reqs, &n, &flags) != HVDS_SUCCESS) {
      HVDS_ERROR("malformed negotiation message from rank %d (%zu bytes) dropped", s->ranks[r],
                 sizes[r]);
      continue;
    }
    for (int32_t i = 0; i < n; i++) reqs[i].rank = r; /* trust the transport, not the bytes */
    rc = hvds__table_add(s, reqs, n, &resps, &nresps, &cap);
    for (int32_t i = 0; i < n; i++) hvds__request_free(&reqs[i]);
    free(reqs);
  }
  if (rc == HVDS_SUCCESS) rc = hvds__table_finish(s, &resps, &nresps, &cap);
  if (rc == HVDS_SUCCESS) hvds__stall_check(s, &resps, &nresps, &cap);
  if (rc == HVDS_SUCCESS) hvds__encode_responses(rb, resps, nresps, 0);
  if (rb->oom) rc = HVDS_SYSTEM_ERROR;
  for (int32_t i = 0; i < nresps; i++) hvds__response_free(&resps[i]);
  free(resps);
  return rc;
}

/* Slow path, step 4: rank 0's encoded responses (rb) to every rank, their length first. */
static hvds_result_t broadcast_responses(hvds_pset_t* s, hvds_buf_t* rb) {
  hvds_coll_opts_t o = {hvds__next_tag(s), HVDS_ALGO_AUTO, 0, 0};
  uint64_t rlen = rb->len;
  HVDS_CHECK(hvds__broadcast(s->comm, &rlen, sizeof rlen, 0, &o));
  if (s->my_rank != 0) {
    rb->data = malloc(rlen ? rlen : 1);
    if (rb->data == NULL) return HVDS_SYSTEM_ERROR;
    rb->len = rb->cap = rlen;
  }
  o.tag = hvds__next_tag(s);
  return hvds__broadcast(s->comm, rb->data, rlen, 0, &o);
}

/* Exchanges requests with the set's rank 0 and returns the responses it decided. */
static hvds_result_t slow_path(hvds_pset_t* s, hvds_request_t* mine, int32_t nmine,
                               hvds_response_t** out, int32_t* nout) {
  hvds_buf_t b = {0}, rb = {0};
  hvds__encode_requests(&b, mine, nmine, 0);
  uint8_t* all = NULL;
  size_t* sizes = calloc((size_t)s->n, sizeof(size_t));
  hvds_result_t rc = b.oom || sizes == NULL ? HVDS_SYSTEM_ERROR : HVDS_SUCCESS;
  if (rc == HVDS_SUCCESS) rc = gather_requests(s, &b, &all, sizes);
  if (rc == HVDS_SUCCESS && s->my_rank == 0) rc = decide(s, all, sizes, &rb);
  if (rc == HVDS_SUCCESS) rc = broadcast_responses(s, &rb);
  if (rc == HVDS_SUCCESS) {
    int32_t flags;
    rc = hvds__decode_responses(rb.data, rb.len, out, nout, &flags);
    if (rc != HVDS_SUCCESS)
      snprintf(s->comm->error, sizeof(s->comm->error), "malformed response list");
  }
  free(sizes);
  free(all);
  hvds__buf_free(&b);
  hvds__buf_free(&rb);
  return rc;
}

/* Where the lane's words start in the bit vector: after the flags and the cache bits. */
static size_t lane_at(const hvds_pset_t* s) { return 1 + ((size_t)s->cache.cap + 63) / 64; }

/* The first cache slot from `from` on whose bit is set in v, or -1: a whole word of clear bits
 * at a time, since most cycles have a tensor or two among a thousand slots. */
static int32_t next_slot(const hvds_pset_t* s, const uint64_t* v, int32_t from) {
  for (int32_t w = from / 64; w < (s->cache.cap + 63) / 64; w++) {
    uint64_t bits = v[1 + w] & (w == from / 64 ? ~0ull << (from % 64) : ~0ull);
    if (bits == 0) continue;
    int32_t b = w * 64 + __builtin_ctzll(bits);
    return b < s->cache.cap ? b : -1;
  }
  return -1;
}

/* Sets this rank's bit vector: a bit per cached tensor it has ready, the flags in word 0, and in
 * inv the slots whose cached parameters no longer match. */
static void fill_vector(hvds_pset_t* s, int want_shutdown, uint64_t* v, uint64_t* inv) {
  hvds_runtime_t* rt = s->rt;
  double stall = rt->stall_check_s;
  double now = hvds__now();
  /* Only a rank with work pending can be stuck: idle cycles skip the handle lock. */
  double stuck = rt->deadlock_s > 0 && s->pending.count > 0 ? hvds__stuck_seconds(rt, now) : 0.0;
  /* Halfway to a deadlock, cached tensors go through rank 0 too, so that it can fail them. */
  int via_rank0 = rt->deadlock_s > 0 && stuck >= rt->deadlock_s / 2;
  int uncached = 0, invalid = 0;
  /* The fast path reads the entries of the slots every rank set, which are this rank's own of
   * this cycle, except for a joined rank, which agrees to slots it has no entry for. */
  if (s->joined) memset(s->bit_entry, 0, (size_t)s->cache.cap * sizeof(*s->bit_entry));
  for (size_t i = 0; i < s->pending.cap; i++) {
    if (!hvds__name_map_live(&s->pending, i)) continue;
    hvds_entry_t* e = s->pending.slots[i].value;
    if (e->sent || e->ordered) continue;
    hvds_request_t r;
    int32_t bit;
    hvds_cache_state_t st = classify(s, e, &r, &bit);
    /* A hit waiting past the stall time goes through rank 0, so the inspector can see it. */
    if (st == HVDS_CACHE_HIT && (now - e->enqueue_time > stall || via_rank0))
      st = HVDS_CACHE_INVALID;
    if (st == HVDS_CACHE_HIT) {
      v[1 + bit / 64] |= 1ull << (bit % 64);
      s->bit_entry[bit] = e;
      continue;
    }
    if (st == HVDS_CACHE_INVALID) {
      inv[1 + bit / 64] |= 1ull << (bit % 64);
      invalid = 1;
    }
    uncached = 1;
  }
  /* The set's rank 0 forces a slow path now and then while tensors wait, so that the stall
   * inspector runs and its verdict reaches every rank. */
  if (s->my_rank == 0 && s->table.count > 0 &&
      now - s->last_stall_check >= (stall < 1.0 ? stall : 1.0) &&
      (!rt->stall_check_disabled || rt->deadlock_s > 0))
    uncached = 1;
  if (s->joined) /* a joined rank agrees to every cached allreduce and contributes zeros */
    for (int32_t b = 0; b < s->cache.cap; b++) {
      const hvds_cache_entry_t* ce = hvds__cache_get(&s->cache, b);
      if (ce && ce->type == HVDS_MSG_ALLREDUCE) v[1 + b / 64] |= 1ull << (b % 64);
    }
  v[0] = (want_shutdown ? 0 : FLAG_NO_SHUTDOWN) | (uncached ? 0 : FLAG_NO_UNCACHED) |
         (invalid ? 0 : FLAG_NO_INVALID) | (has_work(s) ? 0 : FLAG_NO_PENDING) |
         (s->joined ? 0 : FLAG_NO_JOINED) |
         (rt->deadlock_s > 0 && stuck >= rt->deadlock_s ? FLAG_STUCK : 0);
  hvds__lane_fill(s, v + lane_at(s));
}

/* One AND across ranks (and an OR of invalid slots, erased everywhere, when any rank has one). */
static hvds_result_t agree(hvds_pset_t* s, uint64_t* v, uint64_t* inv, size_t words) {
  hvds_result_t rc = hvds__backend_agree(s, v, words, HVDS_REDUCE_BAND);
  if (rc != HVDS_SUCCESS || (v[0] & FLAG_NO_INVALID)) return rc;
  rc = hvds__backend_agree(s, inv, words, HVDS_REDUCE_BOR);
  if (rc != HVDS_SUCCESS) return rc;
  for (int32_t b = next_slot(s, inv, 0); b >= 0; b = next_slot(s, inv, b + 1)) {
    hvds__cache_erase(&s->cache, b);
    v[1 + b / 64] &= ~(1ull << (b % 64));
  }
  return HVDS_SUCCESS;
}

typedef struct {
  hvds_response_t* items;
  int32_t n, cap;
} resp_list_t;

/* Whether a cached tensor can join the allreduce bucket r (the fusion planner's rule). */
static int joins_bucket(const hvds_response_t* r, const hvds_cache_entry_t* ce) {
  return ce->type == HVDS_MSG_ALLREDUCE && ce->sizes == NULL && r->dtype == ce->dtype &&
         r->reduce_op == ce->reduce_op && r->device == ce->device &&
         r->prescale == ce->prescale && r->postscale == ce->postscale;
}

/* Fast path: tensors every rank has ready and cached, in slot order. A run of allreduces that
 * fuse goes into one response as it is found (what the fusion planner would make of the run),
 * sparing a response, its copies and its merge per tensor. */
static hvds_result_t fast_path(hvds_pset_t* s, const uint64_t* v, resp_list_t* out) {
  hvds_runtime_t* rt = s->rt;
  int32_t bucket = -1; /* index in out of the allreduce bucket a run extends */
  int64_t bucket_bytes = 0, threshold = rt->fusion_threshold;
  for (int32_t b = next_slot(s, v, 0); b >= 0; b = next_slot(s, v, b + 1)) {
    const hvds_cache_entry_t* ce = hvds__cache_get(&s->cache, b);
    hvds_entry_t* e = s->bit_entry[b];
    if (e == NULL && ce != NULL && s->joined) e = hvds__name_map_get(&s->pending, ce->name);
    if (ce == NULL || (e == NULL && !s->joined)) continue; /* cannot happen: bits agree */
    if (e) e->sent = 1;
    s->cache_hits++;
    hvds__cache_touch(&s->cache, b);
    int64_t bytes = ce->numel * (int64_t)hvds__dtype_bytes((hvds_dtype_t)ce->dtype);
    hvds_response_t* r = bucket >= 0 ? &out->items[bucket] : NULL;
    if (r && joins_bucket(r, ce) && bucket_bytes + bytes <= threshold) {
      if (hvds__response_add_size(r, ce->numel) != 0 || hvds__response_add_name(r, ce->name) != 0)
        return HVDS_SYSTEM_ERROR;
      bucket_bytes += bytes;
      continue;
    }
    r = hvds__resp_push(&out->items, &out->n, &out->cap);
    if (r == NULL || hvds__cache_response(&s->cache, b, r) != 0) return HVDS_SYSTEM_ERROR;
    int opens = threshold > 0 && r->type == HVDS_MSG_ALLREDUCE && r->nsizes == 1 && bytes <= threshold;
    bucket = opens ? out->n - 1 : -1;
    bucket_bytes = bytes;
  }
  return HVDS_SUCCESS;
}

/* Entries by submission order. */
static int by_seq(const void* a, const void* b) {
  uint64_t x = (*(hvds_entry_t* const*)a)->seq, y = (*(hvds_entry_t* const*)b)->seq;
  return (x > y) - (x < y);
}

/* Slow path: this rank's uncached requests go to the set's rank 0, every rank gets its answer
 * and caches it in the same order, so slot numbers keep agreeing. The requests go in submission
 * order (Horovod's queue is first in, first out): rank 0 answers in the order names become
 * ready, so what a rank queued before a barrier runs before the barrier completes. */
static hvds_result_t slow_round(hvds_pset_t* s, resp_list_t* out) {
  hvds_entry_t** asking = NULL;
  hvds_request_t* mine = NULL;
  int32_t nmine = 0, capmine = 0;
  hvds_result_t rc = HVDS_SUCCESS;
  s->slow_rounds++;
  for (size_t i = 0; i < s->pending.cap && rc == HVDS_SUCCESS; i++) {
    if (!hvds__name_map_live(&s->pending, i)) continue;
    hvds_entry_t* e = s->pending.slots[i].value;
    hvds_request_t r;
    int32_t bit;
    if (e->sent || e->ordered || classify(s, e, &r, &bit) == HVDS_CACHE_HIT) continue;
    /* The lane runs HVDS_LANE_MAX a cycle: a barrier is asked for once the ordered operations
     * queued before it have run (asking late is every rank's right; the lane needs no barrier
     * to go on). */
    if (e->type == HVDS_MSG_BARRIER && s->lane_head && s->lane_head->seq < e->seq) continue;
    if (nmine == capmine) {
      capmine = capmine ? capmine * 2 : 16;
      hvds_entry_t** a = realloc(asking, (size_t)capmine * sizeof(*a));
      if (a == NULL) {
        rc = HVDS_SYSTEM_ERROR;
        break;
      }
      asking = a;
    }
    asking[nmine++] = e;
  }
  if (nmine > 0 && rc == HVDS_SUCCESS) {
    qsort(asking, (size_t)nmine, sizeof(*asking), by_seq);
    mine = malloc((size_t)nmine * sizeof(*mine));
    if (mine == NULL) rc = HVDS_SYSTEM_ERROR;
  }
  for (int32_t k = 0; k < nmine && rc == HVDS_SUCCESS; k++) {
    hvds_entry_t* e = asking[k];
    entry_to_request(s, e, &mine[k]); /* borrows e's name */
    e->sent = 1;
    if (e->type == HVDS_MSG_JOIN) s->joined = 1;
  }
  free(asking);
  if (rc != HVDS_SUCCESS) nmine = 0;
  hvds_response_t* slow = NULL;
  int32_t nslow = 0;
  if (rc == HVDS_SUCCESS) rc = slow_path(s, mine, nmine, &slow, &nslow);
  for (int32_t i = 0; i < nslow; i++) {
    hvds__cache_put(&s->cache, &slow[i], 0); /* only the cacheable types are kept */
    hvds_response_t* r = rc == HVDS_SUCCESS ? hvds__resp_push(&out->items, &out->n, &out->cap) : NULL;
    if (r) *r = slow[i]; else hvds__response_free(&slow[i]);
  }
  free(slow);
  free(mine);
  return rc;
}

hvds_result_t hvds__negotiate(hvds_pset_t* s, int want_shutdown, hvds_response_t** out,
                              int32_t* nout, int* shutdown) {
  hvds_runtime_t* rt = s->rt;
  *out = NULL;
  *nout = 0;
  *shutdown = 0;
  double t_start = hvds__now();
  pop_queue(s);

  const size_t words = lane_at(s) + HVDS_LANE_WORDS;
  uint64_t stackv[2 * (1 + STACK_CACHE_SLOTS / 64 + HVDS_LANE_WORDS)];
  uint64_t* v = words * 2 <= sizeof stackv / sizeof *stackv ? stackv : calloc(words * 2, sizeof(uint64_t));
  if (v == NULL) return HVDS_SYSTEM_ERROR;
  uint64_t* inv = v + words;
  memset(v, 0, words * 2 * sizeof(uint64_t));
  fill_vector(s, want_shutdown, v, inv);

  resp_list_t resps = {NULL, 0, 0};
  hvds_result_t rc = agree(s, v, inv, words);
  if (rc == HVDS_SUCCESS) {
    *shutdown = !(v[0] & FLAG_NO_SHUTDOWN);
    s->busy_anywhere = !(v[0] & FLAG_NO_PENDING);
    s->all_stuck = (v[0] & FLAG_STUCK) != 0;
    /* The lane first: what is pipelined must not wait behind negotiated work. */
    rc = hvds__lane_take(s, v + lane_at(s), !(v[0] & FLAG_NO_JOINED), &resps.items, &resps.n,
                         &resps.cap);
  }
  if (rc == HVDS_SUCCESS) {
    rc = fast_path(s, v, &resps);
  }
  if (rc == HVDS_SUCCESS && !(v[0] & FLAG_NO_UNCACHED)) rc = slow_round(s, &resps);
  HVDS_TRACE("set %d cycle: %zu pending, %d responses, slow path %d, %.3f ms", s->id,
             s->pending.count, resps.n, !(v[0] & FLAG_NO_UNCACHED), (hvds__now() - t_start) * 1e3);
  if (rc == HVDS_SUCCESS &&
      hvds__fuse_responses(resps.items, resps.n, rt->fusion_threshold, out, nout) != 0)
    rc = HVDS_SYSTEM_ERROR;
  if (rc == HVDS_SUCCESS) {
    free(resps.items); /* items moved into *out */
  } else {
    for (int32_t i = 0; i < resps.n; i++) hvds__response_free(&resps.items[i]);
    free(resps.items);
  }
  if (v != stackv) free(v);
  return rc;
}
