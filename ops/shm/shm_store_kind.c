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
  c->forced = -1;
}

hvds_store_kind_t hvds__store_choice_pick(hvds_store_choice_t* c, size_t bytes) {
  if (c->forced >= 0) return (hvds_store_kind_t)c->forced;
  if (!hvds__stream_copy_exists() || bytes < HVDS_STORE_CHOICE_MIN_BYTES) return HVDS_STORE_CACHED;
  hvds_store_class_t* k = &c->cls[size_class(bytes)];
  uint32_t n = k->ops++;
  if (n < 2 || k->us_per_mib[HVDS_STORE_CACHED] == 0) return HVDS_STORE_CACHED;
  if (k->us_per_mib[HVDS_STORE_STREAMED] == 0) return HVDS_STORE_STREAMED;
  hvds_store_kind_t best = k->us_per_mib[HVDS_STORE_STREAMED] < k->us_per_mib[HVDS_STORE_CACHED]
                               ? HVDS_STORE_STREAMED
                               : HVDS_STORE_CACHED;
  if (n % HVDS_STORE_RETRY_EVERY == HVDS_STORE_RETRY_EVERY - 1)
    return best == HVDS_STORE_CACHED ? HVDS_STORE_STREAMED : HVDS_STORE_CACHED;
  return best;
}

void hvds__store_choice_record(hvds_store_choice_t* c, size_t bytes, hvds_store_kind_t kind,
                               int64_t us) {
  if (c->forced >= 0 || bytes < HVDS_STORE_CHOICE_MIN_BYTES) return;
  double t = (double)(us > 0 ? us : 1) / ((double)bytes / (1 << 20));
  double* e = &c->cls[size_class(bytes)].us_per_mib[kind];
  *e = *e == 0 || t < *e ? t : 0.75 * *e + 0.25 * t;
}
