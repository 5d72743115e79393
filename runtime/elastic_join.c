/* Joining an elastic job's newest membership.
 *
 * Keys the launcher writes (launcher/elastic.c):
 *   hvds/<job>/elastic/epoch            the newest membership's number, "N"
 *   hvds/<job>/elastic/e<N>/<host>:<id>  "rank,size,local_rank,local_size,cross_rank,cross_size"
 * <id> is the worker's HVDSPARSE_LOCAL_RANK at spawn, which never changes for that process.
 * A worker absent from the newest membership was removed from the job. A worker marks each
 * membership it reads (HVDS_KEY_ELASTIC_READ), for the launcher.
 */
#include "elastic_join.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "log.h"
#include "param.h"
#include "store.h"
#include "store_keys.h"

#define POLL_MS 20
/* How often a rendezvous wait looks for a newer membership. */
#define RENDEZVOUS_SLICE_MS 100

static int64_t read_epoch(hvds_store_t* s, const char* job) {
  char key[256];
  snprintf(key, sizeof key, "hvds/%s/elastic/epoch", job);
  void* val = NULL;
  size_t len = 0;
  int64_t epoch = -1;
  if (hvds__store_get_within(s, key, 0, HVDS_STORE_STOPPING_REPLY_MS, &val, &len) ==
      HVDS_SUCCESS) {
    char text[32];
    snprintf(text, sizeof text, "%.*s", (int)(len < sizeof text ? len : sizeof text - 1),
             (char*)val);
    epoch = strtoll(text, NULL, 10);
  }
  free(val);
  return epoch;
}

/* Reads this worker's line of membership epoch into rt; 0 when absent (removed), -1 when bad. */
static int read_assignment(hvds_runtime_t* rt, const char* job, int64_t epoch, const char* id) {
  char key[512];
  snprintf(key, sizeof key, "hvds/%s/elastic/e%lld/%s", job, (long long)epoch, id);
  void* val = NULL;
  size_t len = 0;
  if (hvds__store_get_within(rt->store, key, 0, HVDS_STORE_STOPPING_REPLY_MS, &val, &len) !=
      HVDS_SUCCESS)
    return 0;
  char text[128];
  snprintf(text, sizeof text, "%.*s", (int)(len < sizeof text ? len : sizeof text - 1),
           (char*)val);
  free(val);
  int v[6];
  if (sscanf(text, "%d,%d,%d,%d,%d,%d", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6) return -1;
  rt->rank = v[0];
  rt->size = v[1];
  rt->local_rank = v[2];
  rt->local_size = v[3];
  rt->cross_rank = v[4];
  rt->cross_size = v[5];
  return 1;
}

hvds_result_t hvds__elastic_join(hvds_runtime_t* rt, const char* addr, int port, const char* host) {
  const char* job = hvds__param_str(HVDS_PARAM_JOB_ID);
  double timeout_s = hvds__param_dbl(HVDS_PARAM_ELASTIC_TIMEOUT);
  int64_t deadline = hvds__now_ms() + (int64_t)(timeout_s * 1000);
  char id[300];
  snprintf(id, sizeof id, "%s:%lld", host, (long long)hvds__param_int(HVDS_PARAM_LOCAL_RANK));
  if (rt->store == NULL) {
    const char* secret = hvds__param_str(HVDS_PARAM_SECRET);
    char err[512] = "";
    if (addr == NULL || port <= 0)
      return hvds__set_error(HVDS_INVALID_USAGE,
                             "%s: an elastic worker needs the launcher's store "
                             "(HVDSPARSE_GLOO_RENDEZVOUS_ADDR and _PORT)", id);
    hvds_result_t rc = hvds__store_connect(addr, port, secret ? secret : "",
                                           (int)(timeout_s * 1000), &rt->store, err, sizeof err);
    if (rc != HVDS_SUCCESS)
      return hvds__set_error(rc, "%s: cannot reach the launcher's store at %s:%d: %s", id, addr,
                             port, err);
  }
  // Wait for a membership newer than the last one joined: after a failure the launcher needs a
  // moment to notice which worker exited.
  for (;;) {
    int64_t epoch = read_epoch(rt->store, job);
    if (epoch > rt->elastic_epoch) {
      int got = read_assignment(rt, job, epoch, id);
      if (got == 0)
        return hvds__set_error(HVDS_INVALID_USAGE, "%s has been removed from elastic job", id);
      if (got < 0 || rt->size < 1 || rt->rank < 0 || rt->rank >= rt->size)
        return hvds__set_error(HVDS_INTERNAL_ERROR, "%s: unreadable assignment in membership %lld",
                               id, (long long)epoch);
      // For the launcher: a membership whose worker exits without reading it never forms.
      char read_key[512];
      snprintf(read_key, sizeof read_key, HVDS_KEY_ELASTIC_READ, job, (long long)epoch, id);
      hvds__store_set(rt->store, read_key, "1", 1);
      rt->elastic_epoch = epoch;
      rt->generation = (int)epoch;
      snprintf(rt->job, sizeof rt->job, "%s.e%lld", job, (long long)epoch);
      HVDS_INFO("%s joins membership %lld as rank %d of %d", id, (long long)epoch, rt->rank,
                rt->size);
      return HVDS_SUCCESS;
    }
    const char* lost = hvds__store_lost(rt->store);
    if (lost != NULL)
      return hvds__set_error(HVDS_SYSTEM_ERROR, "%s: lost the launcher's store: %s", id, lost);
    if (hvds__now_ms() >= deadline)
      return hvds__set_error(HVDS_TIMEOUT,
                             "%s: the launcher published no new membership within %g s "
                             "(HVDSPARSE_ELASTIC_TIMEOUT)", id, timeout_s);
    struct timespec ts = {0, POLL_MS * 1000000L};
    nanosleep(&ts, NULL);
  }
}

int64_t hvds__elastic_published_epoch(hvds_runtime_t* rt) {
  if (rt->store == NULL) return -1;
  return read_epoch(rt->store, hvds__param_str(HVDS_PARAM_JOB_ID));
}

hvds_result_t hvds__elastic_kv_set(void* ctx, const char* key, const void* val, size_t len) {
  return hvds__store_set(((hvds_runtime_t*)ctx)->store, key, val, len);
}

hvds_result_t hvds__elastic_kv_get(void* ctx, const char* key, int timeout_ms, void** val,
                                   size_t* len) {
  hvds_runtime_t* rt = ctx;
  int64_t deadline = hvds__now_ms() + timeout_ms;
  for (;;) {
    int64_t left = deadline - hvds__now_ms();
    int slice = left < RENDEZVOUS_SLICE_MS ? (int)(left > 0 ? left : 0) : RENDEZVOUS_SLICE_MS;
    hvds_result_t rc = hvds__store_get(rt->store, key, slice, val, len);
    if (rc != HVDS_TIMEOUT || left <= RENDEZVOUS_SLICE_MS) return rc;
    int64_t published = hvds__elastic_published_epoch(rt);
    if (published > rt->elastic_epoch) {
      HVDS_INFO("membership %lld replaces %lld during its rendezvous", (long long)published,
                (long long)rt->elastic_epoch);
      return HVDS_REMOTE_ERROR;
    }
  }
}
