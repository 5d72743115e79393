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
  for (int i = 0; i < HVDS_STORE_CLASSES; i++) c->cls[i].last = c->cls[i].before = -1;
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

hvds_store_kind_t hvds__store_choice_pick(hvds_store_choice_t* c, size_t bytes) {
  if (c->forced >= 0) return (hvds_store_kind_t)c->forced;
  if (!hvds__stream_copy_exists() || bytes < HVDS_STORE_CHOICE_MIN_BYTES) return HVDS_STORE_CACHED;
  hvds_store_class_t* k = &c->cls[size_class(bytes)];
  uint32_t n = k->ops++;
  double cached = estimate(k, HVDS_STORE_CACHED), streamed = estimate(k, HVDS_STORE_STREAMED);
  hvds_store_kind_t kind;
  if (n < HVDS_STORE_FIRST_CACHED || cached == 0) {
    kind = HVDS_STORE_CACHED;
  } else if (n < HVDS_STORE_FIRST_CACHED + HVDS_STORE_TRY || streamed == 0) {
    kind = HVDS_STORE_STREAMED;
  } else {
    hvds_store_kind_t best = streamed < cached ? HVDS_STORE_STREAMED : HVDS_STORE_CACHED;
    int retry = n % HVDS_STORE_RETRY_EVERY >= HVDS_STORE_RETRY_EVERY - HVDS_STORE_TRY;
    kind = retry ? other(best) : best;
  }
  k->before = k->last;
  k->last = (int8_t)kind;
  return kind;
}

void hvds__store_choice_record(hvds_store_choice_t* c, size_t bytes, hvds_store_kind_t kind,
                               int64_t us) {
  if (c->forced >= 0 || bytes < HVDS_STORE_CHOICE_MIN_BYTES) return;
  hvds_store_class_t* k = &c->cls[size_class(bytes)];
  if (k->before >= 0 && k->before != (int8_t)kind) return;  // paid for the other kind's caches
  double t = (double)(us > 0 ? us : 1) / ((double)bytes / (1 << 20));
  k->recent[kind][k->next[kind]++ % HVDS_STORE_WINDOW] = t;
}
