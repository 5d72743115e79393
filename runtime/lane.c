/* The ordered fast lane (lane.h).
 *
 * Words of the bit vector, after the cache bits:
 *   count   bit i set while this rank has more than i ordered operations queued: the AND is
 *           the smallest queue, as trailing ones
 *   P_k     for k = 1..HVDS_LANE_MAX, the fingerprint of this rank's first k queued operations,
 *   ~P_k    and its complement; a rank with fewer than k queued sends all ones for both.
 * Every rank that differs from another in a bit of P_k finds it: where one has a 1 the AND of P_k
 * has a 0, where one has a 0 the AND of ~P_k has a 0. The first operation whose prefix differs
 * fails on every rank (it is at the same position everywhere, so the lanes stay aligned) and the
 * ones after it are compared in the next cycle on their own. */
#include "lane.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "exec_shared.h"
#include "log.h"
#include "message.h"
#include "param.h"
#include "table.h"

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

/* What must match across ranks: name, collective, dtype, op, factors, device class and shape. */
static uint64_t fingerprint(const hvds_entry_t* e) {
  uint64_t h = 1469598103934665603ull;
  for (const char* c = e->name; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
  h = mix(h, (uint64_t)e->type);
  h = mix(h, (uint64_t)e->input.dtype);
  h = mix(h, (uint64_t)e->op);
  h = mix(h, (uint64_t)(int64_t)hvds__device_class(e->input.device));
  uint64_t bits;
  memcpy(&bits, &e->prescale, sizeof bits);
  h = mix(h, bits);
  memcpy(&bits, &e->postscale, sizeof bits);
  h = mix(h, bits);
  h = mix(h, (uint64_t)e->input.ndim);
  for (int32_t d = 0; d < e->input.ndim; d++) h = mix(h, (uint64_t)e->input.shape[d]);
  return h;
}

void hvds__lane_push(hvds_pset_t* s, hvds_entry_t* e) {
  e->lane_next = NULL;
  if (s->lane_tail) s->lane_tail->lane_next = e; else s->lane_head = e;
  s->lane_tail = e;
}

void hvds__lane_clear(hvds_pset_t* s) { s->lane_head = s->lane_tail = NULL; }

void hvds__lane_fill(const hvds_pset_t* s, uint64_t* w) {
  int k = 0;
  uint64_t p = 0;
  for (const hvds_entry_t* e = s->lane_head; e && k < HVDS_LANE_MAX; e = e->lane_next) {
    p = mix(p, fingerprint(e));
    w[1 + 2 * k] = p;
    w[2 + 2 * k] = ~p;
    k++;
  }
  w[0] = k == 64 ? ~0ull : (1ull << k) - 1;
  for (; k < HVDS_LANE_MAX; k++) w[1 + 2 * k] = w[2 + 2 * k] = ~0ull;
}

static void describe(const hvds_entry_t* e, char* out, size_t len) {
  size_t off = (size_t)snprintf(out, len, "%s '%s' (%s, shape [", hvds__msg_type_name(e->type),
                                e->name, hvds__dtype_name(e->input.dtype));
  for (int32_t d = 0; d < e->input.ndim && off < len; d++)
    off += (size_t)snprintf(out + off, len - off, d ? ", %lld" : "%lld",
                            (long long)e->input.shape[d]);
  if (off < len) snprintf(out + off, len - off, "])");
}

/* Fails this rank's oldest queued ordered operation with msg. */
static void fail_head(hvds_pset_t* s, hvds_result_t status, const char* msg) {
  hvds_runtime_t* rt = s->rt;
  hvds_entry_t* e = s->lane_head;
  s->lane_head = e->lane_next;
  if (s->lane_head == NULL) s->lane_tail = NULL;
  s->lane_done++;
  hvds__name_map_remove(&s->pending, e->name);
  hvds__entry_finish(rt, e, status, msg);
}

/* Fails every queued ordered operation of this rank with msg. */
static void fail_all(hvds_pset_t* s, hvds_result_t status, const char* msg) {
  hvds_runtime_t* rt = s->rt;
  hvds_entry_t* e = s->lane_head;
  hvds__lane_clear(s);
  while (e) {
    hvds_entry_t* next = e->lane_next;
    hvds__name_map_remove(&s->pending, e->name);
    hvds__entry_finish(rt, e, status, msg);
    e = next;
  }
}

/* The response the set's rank 0 would have built for e (table.c's construct). */
static int respond(const hvds_pset_t* s, const hvds_entry_t* e, hvds_response_t* r) {
  memset(r, 0, sizeof(*r));
  r->type = e->type;
  r->dtype = e->input.dtype;
  r->reduce_op = e->op;
  r->root_rank = e->root_rank;
  r->device = hvds__device_class(e->input.device);
  r->prescale = e->prescale;
  r->postscale = e->postscale;
  r->last_joined_rank = -1;
  int64_t numel = 1;
  for (int32_t d = 0; d < e->input.ndim; d++) numel *= e->input.shape[d];
  int oom = hvds__response_add_name(r, e->name) != 0;
  if (e->type == HVDS_MSG_ALLGATHER) /* the fingerprint saw the same first dimension everywhere */
    for (int32_t k = 0; k < s->n && !oom; k++)
      oom |= hvds__response_add_size(r, e->input.ndim ? e->input.shape[0] : 1) != 0;
  else
    oom |= hvds__response_add_size(r, numel) != 0;
  if (!oom && e->type != HVDS_MSG_ALLREDUCE) {
    r->extra = malloc((size_t)(e->input.ndim > 0 ? e->input.ndim : 1) * sizeof(int32_t));
    oom |= r->extra == NULL;
    for (int32_t d = 0; !oom && d < e->input.ndim; d++) r->extra[d] = (int32_t)e->input.shape[d];
    if (!oom) r->nextra = e->input.ndim;
  }
  if (oom) hvds__response_free(r);
  return oom ? -1 : 0;
}

/* Warns once when the head has waited past the stall time, and fails the lane after the
 * shutdown time: some rank has not submitted its ordered operations up to the head. */
static void stall(hvds_pset_t* s) {
  hvds_runtime_t* rt = s->rt;
  hvds_entry_t* e = s->lane_head;
  if (e == NULL || rt->stall_check_disabled) return;
  double waited = hvds__now() - e->enqueue_time;
  double warn = rt->stall_check_s, stop = hvds__param_dbl(HVDS_PARAM_STALL_SHUTDOWN_TIME_SECONDS);
  if (stop > 0 && stop < warn) stop = warn;
  if (waited < warn) return;
  char what[512], msg[1024];
  describe(e, what, sizeof what);
  snprintf(msg, sizeof msg,
           "Ordered operation %s of process set %d has waited %d seconds on rank "
           "%d: another rank has not submitted its ordered operations up to this one. Every rank "
           "must submit ordered operations in the same order.",
           what, s->id, (int)waited, rt->rank);
  if (stop > 0 && waited >= stop) {
    HVDS_ERROR("%s Failing them.", msg);
    fail_all(s, HVDS_PRECONDITION_ERROR, msg);
  } else if (!e->lane_warned) {
    e->lane_warned = 1;
    HVDS_WARN("%s", msg);
  }
}

hvds_result_t hvds__lane_take(hvds_pset_t* s, const uint64_t* w, int any_joined,
                              hvds_response_t** items, int32_t* n, int32_t* cap) {
  hvds_runtime_t* rt = s->rt;
  if (s->lane_head == NULL) return HVDS_SUCCESS;
  char what[512], msg[2048];
  if (any_joined) {
    describe(s->lane_head, what, sizeof what);
    snprintf(msg, sizeof msg,
             "Ordered operation %s cannot run on rank %d: a rank of process set "
             "%d has joined, and ordered operations need every rank.",
             what, rt->rank, s->id);
    fail_all(s, HVDS_PRECONDITION_ERROR, msg);
    return HVDS_SUCCESS;
  }
  int ready = 0;
  while (ready < HVDS_LANE_MAX && (w[0] >> ready) & 1) ready++;
  uint64_t p = 0;
  int mismatch = 0;
  hvds_entry_t* e = s->lane_head;
  for (int k = 0; k < ready; k++, e = e->lane_next) {
    p = mix(p, fingerprint(e));
    if ((w[1 + 2 * k] & p) == p && (w[2 + 2 * k] & ~p) == ~p) continue;
    describe(e, what, sizeof what);
    snprintf(msg, sizeof msg,
             "Mismatched ordered operations: ordered operation %llu of process "
             "set %d differs between ranks; rank %d submitted %s. Ordered operations must be "
             "submitted in the same order, with the same names, dtypes, ops and shapes, on every "
             "rank.",
             (unsigned long long)(s->lane_done + (uint64_t)k), s->id, rt->rank, what);
    HVDS_ERROR("%s", msg);
    ready = k; /* the operations before it match and run; it and the rest fail below */
    mismatch = 1;
    break;
  }
  for (int k = 0; k < ready; k++) {
    e = s->lane_head;
    s->lane_head = e->lane_next;
    if (s->lane_head == NULL) s->lane_tail = NULL;
    e->sent = 1;
    s->lane_done++;
    hvds_response_t* r = hvds__resp_push(items, n, cap);
    if (r == NULL || respond(s, e, r) != 0) return HVDS_SYSTEM_ERROR;
  }
  if (mismatch) {  // the same position on every rank: the lanes stay aligned for what follows
    fail_head(s, HVDS_PRECONDITION_ERROR, msg);
    return HVDS_SUCCESS;
  }
  stall(s);
  return HVDS_SUCCESS;
}
