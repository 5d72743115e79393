/* Rank 0's in-process rendezvous store for jobs without `hvdsparse run`. Keys it uses:
 *   hvds/<job>/serving         the generation (init count) the server belongs to, set by rank 0
 *   hvds/<job>/g<gen>/joined   ranks other than 0 that reached this generation's store (ADD)
 *   hvds/<job>/g<gen>/done     ranks done with the store at shutdown (an ADD counter) */
#include "launch_store.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "log.h"
#include "store.h"
#include "store_keys.h"

#define PROBE_RETRY_MS 50
#define DONE_POLL_MS 5

struct hvds_launch_store {
  hvds_store_server_t* server; /* rank 0 only */
  char job[128];
  int generation;
};

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static void serving_key(const hvds_launch_store_t* ls, char* out, size_t len) {
  snprintf(out, len, HVDS_KEY_SERVING, ls->job);
}

static void generation_key(const hvds_launch_store_t* ls, const char* what, char* out, size_t len) {
  snprintf(out, len, HVDS_KEY_SERVED, ls->job, ls->generation, what);
}

/* Rank 0: listen, then record which generation this server belongs to. */
static hvds_result_t serve(hvds_launch_store_t* ls, const hvds_launch_env_t* env,
                           const char* secret, char* err, size_t errlen) {
  int port = 0;
  if (hvds__store_server_start(env->bind_addr, env->store_port, secret, &ls->server, &port) !=
      HVDS_SUCCESS) {
    snprintf(err, errlen,
             "rank 0 cannot serve the rendezvous store on %s:%d (port taken? set "
             "HVDSPARSE_GLOO_RENDEZVOUS_PORT to a free port on every rank)",
             env->bind_addr[0] ? env->bind_addr : "*", env->store_port);
    return HVDS_SYSTEM_ERROR;
  }
  char key[256], gen[16];
  serving_key(ls, key, sizeof(key));
  snprintf(gen, sizeof(gen), "%d", ls->generation);
  hvds_result_t rc = hvds__store_server_set(ls->server, key, gen, strlen(gen));
  if (rc != HVDS_SUCCESS) snprintf(err, errlen, "rank 0 cannot record its store's generation");
  HVDS_INFO("serving the rendezvous store for %s on %s:%d%s", hvds__launch_engine_name(env->engine),
            env->bind_addr[0] ? env->bind_addr : "*", port,
            secret[0] ? "" : " without a secret (set HVDSPARSE_SECRET on every rank for one)");
  return rc;
}

/* 1 when the store at the other end of s serves generation; else writes why not to err. */
static int serves_generation(const hvds_launch_store_t* ls, hvds_store_t* s, char* err,
                             size_t errlen) {
  char key[256];
  serving_key(ls, key, sizeof(key));
  void* val = NULL;
  size_t len = 0;
  if (hvds__store_get(s, key, 0, &val, &len) != HVDS_SUCCESS) {
    snprintf(err, errlen, "rank 0's store has not started serving");
    return 0;
  }
  int gen = atoi((const char*)val);
  free(val);
  if (gen == ls->generation) return 1;
  snprintf(err, errlen, "rank 0's store serves init %d, this rank is at init %d", gen,
           ls->generation);
  return 0;
}

/* Other ranks: connect until the store serves this generation (a previous init's server may
 * still be up while rank 0 waits for every rank to be done with it). */
static hvds_result_t await(hvds_launch_store_t* ls, const hvds_launch_env_t* env,
                           const char* secret, int timeout_ms, char* err, size_t errlen) {
  int64_t deadline = hvds__now_ms() + timeout_ms;
  for (;;) {
    int64_t left = deadline - hvds__now_ms();
    hvds_store_t* s = NULL;
    hvds_result_t rc = hvds__store_connect(env->store_addr, env->store_port, secret,
                                           left > 0 ? (int)left : 1, &s, err, errlen);
    if (rc == HVDS_INVALID_ARGUMENT) return rc;  // wrong secret or address: retrying won't help
    int ready = rc == HVDS_SUCCESS && serves_generation(ls, s, err, errlen);
    char joined[256];
    int64_t count;
    generation_key(ls, "joined", joined, sizeof(joined));
    if (ready) hvds__store_add(s, joined, 1, &count);  // rank 0 then waits for this rank's "done"
    hvds__store_close(s);
    if (ready) return HVDS_SUCCESS;
    if (hvds__now_ms() >= deadline) return HVDS_TIMEOUT;
    sleep_ms(PROBE_RETRY_MS);
  }
}

hvds_result_t hvds__launch_store_open(const hvds_launch_env_t* env, const char* secret,
                                      int generation, int timeout_ms, hvds_launch_store_t** out,
                                      char* err, size_t errlen) {
  *out = NULL;
  hvds_launch_store_t* ls = calloc(1, sizeof(*ls));
  if (ls == NULL) {
    snprintf(err, errlen, "out of memory");
    return HVDS_SYSTEM_ERROR;
  }
  snprintf(ls->job, sizeof(ls->job), "%s", env->job_id);
  ls->generation = generation;
  hvds_result_t rc = env->rank == 0 ? serve(ls, env, secret, err, errlen)
                                    : await(ls, env, secret, timeout_ms, err, errlen);
  if (rc != HVDS_SUCCESS) {
    hvds__launch_store_close(ls, NULL, 0);
    return rc;
  }
  *out = ls;
  return HVDS_SUCCESS;
}

int hvds__launch_store_refused(const hvds_launch_store_t* ls) {
  return ls ? hvds__store_server_refused(ls->server) : 0;
}

/* A counter of this generation as rank 0's server holds it (0 when unset). */
static int64_t counter(const hvds_launch_store_t* ls, const char* what) {
  char key[256], val[32];
  generation_key(ls, what, key, sizeof(key));
  return hvds__store_server_get(ls->server, key, val, sizeof(val)) ? strtoll(val, NULL, 10) : 0;
}

/* Rank 0: until every rank that reached the store, itself included, is done with it, or wait_ms.
 * A rank that never came (a failed start) is not waited for. */
static void await_done(const hvds_launch_store_t* ls, int wait_ms) {
  int64_t deadline = hvds__now_ms() + wait_ms;
  for (;;) {
    int64_t reached = counter(ls, "joined") + 1, done = counter(ls, "done");
    if (done >= reached) return;
    if (hvds__now_ms() >= deadline) {
      HVDS_WARN("stopping the rendezvous store after %d ms although %lld of the %lld ranks that "
                "reached it have not finished with it",
                wait_ms, (long long)(reached - done), (long long)reached);
      return;
    }
    sleep_ms(DONE_POLL_MS);
  }
}

void hvds__launch_store_close(hvds_launch_store_t* ls, hvds_store_t* store, int wait_ms) {
  if (ls == NULL) return;
  if (store != NULL) {
    char key[256];
    int64_t done = 0;
    generation_key(ls, "done", key, sizeof(key));
    hvds__store_add(store, key, 1, &done);
  }
  // Rank 0 keeps serving until the others are done, so none loses the store mid-request.
  if (ls->server != NULL && wait_ms > 0) await_done(ls, wait_ms);
  hvds__store_server_stop(ls->server);
  free(ls);
}
