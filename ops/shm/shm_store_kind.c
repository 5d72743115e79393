/* The slot writes' kind per allreduce size (shm_store_kind.h). */
#include "shm_store_kind.h"

#include <string.h>

#include "copy.h"

static int size_class(size_t bytes) {
  int k = 0;
  for (size_t b = bytes / HVDS_STORE_CHOICE_MIN_BYTES; b > 1 && k < HVDS_STORE_CLASSES - 1; b >>= 1)
    k++;
  return k;
}

void hvds__store_choice_init(hvds_store_choice_t* c) {
  memset(c, 0, sizeof *c);
  for (int i = 0; i < HVDS_STORE_CLASSES; i++) {
    hvds_store_class_t* k = &c->cls[i];
    k->last = k->before = k->tried = -1;
    k->in_use = HVDS_STORE_CACHED;
    k->wait = HVDS_STORE_RETRY_EVERY;
  }
  c->forced = -1;
}

/* The least of a kind's recent times; 0 while it has none. */
static double estimate(const hvds_store_class_t* k, hvds_store_kind_t kind) {
  double least = 0;
  for (int i = 0; i < HVDS_STORE_WINDOW; i++) {
    double t = k->recent[kind][i];
    if (t > 0 && (least == 0 || t < least)) least = t;
  }
  return least;
}

static hvds_store_kind_t other(hvds_store_kind_t kind) {
  return kind == HVDS_STORE_CACHED ? HVDS_STORE_STREAMED : HVDS_STORE_CACHED;
}

/* After a try: the tried kind is kept if its estimate is the lower, both resting on times
 * taken next to each other. Losing by HVDS_STORE_CLEAR_LOSS or more doubles the wait for the
 * next try; anything else resets it. */
static void judge_try(hvds_store_class_t* k) {
  hvds_store_kind_t tried_kind = (hvds_store_kind_t)k->tried;
  double tried = estimate(k, tried_kind), kept = estimate(k, other(tried_kind));
  if (kept == 0 || (tried > 0 && tried < kept)) k->in_use = (int8_t)tried_kind;
  if (kept == 0 || tried < kept * HVDS_STORE_CLEAR_LOSS)
    k->wait = HVDS_STORE_RETRY_EVERY;
  else if (k->wait < HVDS_STORE_RETRY_MOST)
    k->wait *= 2;
  k->tried = -1;
}

/* Starts a try of the kind not in use. */
static hvds_store_kind_t start_try(hvds_store_class_t* k) {
  hvds_store_kind_t kind = other((hvds_store_kind_t)k->in_use);
  k->tried = (int8_t)kind;
  k->trying = HVDS_STORE_TRY - 1;
  k->since = 0;
  k->us_since = 0;
  return kind;
}

hvds_store_kind_t hvds__store_choice_pick(hvds_store_choice_t* c, size_t bytes) {
  if (c->forced >= 0) return (hvds_store_kind_t)c->forced;
  if (!hvds__stream_copy_exists() || bytes < HVDS_STORE_CHOICE_MIN_BYTES) return HVDS_STORE_CACHED;
  hvds_store_class_t* k = &c->cls[size_class(bytes)];
  uint32_t n = k->ops++;
  hvds_store_kind_t kind;
  if (n < HVDS_STORE_FIRST_CACHED) {
    kind = HVDS_STORE_CACHED;
  } else if (k->trying > 0) {
    kind = (hvds_store_kind_t)k->tried;
    k->trying--;
  } else {
    if (k->tried >= 0) judge_try(k);
    int due = n == HVDS_STORE_FIRST_CACHED || k->since >= k->wait ||
              (k->since >= HVDS_STORE_RETRY_EVERY && k->us_since >= HVDS_STORE_RETRY_US);
    if (due) {
      kind = start_try(k);
    } else {
      kind = (hvds_store_kind_t)k->in_use;
      k->since++;
    }
  }
  k->before = k->last;
  k->last = (int8_t)kind;
  return kind;
}

void hvds__store_choice_record(hvds_store_choice_t* c, size_t bytes, hvds_store_kind_t kind,
                               int64_t us) {
  if (c->forced >= 0 || bytes < HVDS_STORE_CHOICE_MIN_BYTES) return;
  hvds_store_class_t* k = &c->cls[size_class(bytes)];
  k->us_since += (double)us;
  if (k->before >= 0 && k->before != (int8_t)kind) return;  // paid for the other kind's caches
  double t = (double)(us > 0 ? us : 1) / ((double)bytes / (1 << 20));
  k->recent[kind][k->next[kind]++ % HVDS_STORE_WINDOW] = t;
}
