/* Arrivals at rendezvous (arrivals.h). */
#include "arrivals.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_keys.h"

hvds_result_t hvds__arrivals_init(hvds_arrivals_t* a, int np) {
  memset(a, 0, sizeof(*a));
  a->arrived = calloc((size_t)np, 1);
  a->np = np;
  a->first_ms = -1;
  return a->arrived ? HVDS_SUCCESS : HVDS_SYSTEM_ERROR;
}

int hvds__arrivals_update(hvds_arrivals_t* a, hvds_store_server_t* store, const char* job_id,
                          int64_t now_ms) {
  if (a->arrived == NULL || a->count >= a->np) return 0;
  char key[160], val[32];
  snprintf(key, sizeof(key), HVDS_KEY_ARRIVED, job_id);
  // The per-rank keys are the truth; the counter only says when to look again.
  if (!hvds__store_server_get(store, key, val, sizeof(val)) || atoi(val) == a->count) return 0;
  int before = a->count;
  for (int r = 0; r < a->np; r++) {
    if (a->arrived[r]) continue;
    snprintf(key, sizeof(key), HVDS_KEY_ARRIVED_RANK, job_id, r);
    if (hvds__store_server_get(store, key, val, sizeof(val))) {
      a->arrived[r] = 1;
      a->count++;
    }
  }
  if (a->count > 0 && a->first_ms < 0) a->first_ms = now_ms;
  return a->count > before;
}

void hvds__arrivals_missing(const hvds_arrivals_t* a, char* out, size_t len) {
  int missing = a->np - a->count, named = 0;
  size_t used = 0;
  out[0] = '\0';
  for (int r = 0; r < a->np && named < 16 && used < len; r++) {
    if (a->arrived[r]) continue;
    named++;
    const char* sep = named == 1 ? "" : named == missing ? " and " : ", ";
    used += (size_t)snprintf(out + used, len - used, "%s%d", sep, r);
  }
  if (missing > named && used < len) snprintf(out + used, len - used, " and %d more", missing - named);
}

void hvds__arrivals_free(hvds_arrivals_t* a) {
  free(a->arrived);
  a->arrived = NULL;
}
