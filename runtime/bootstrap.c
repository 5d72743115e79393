/* Rendezvous and communicator set-up. */
#include "bootstrap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "collectives.h"
#include "elastic_join.h"
#include "hierarchy.h"
#include "launch_env.h"
#include "launch_store.h"
#include "launch_topology.h"
#include "log.h"
#include "p2p.h"
#include "param.h"
#include "process_set.h"
#include "state.h"
#include "store.h"
#include "store_keys.h"
#include "tags.h"
#include "transports.h"

/* ---- a one-rank communicator: algorithms never send at size 1 ---- */
static hvds_result_t self_xfer(hvds_p2p_t* p, int peer, const void* buf, size_t bytes, uint64_t tag,
                               hvds_p2p_req_t** req) {
  snprintf(p->error, sizeof(p->error), "a single-rank job has no peer to reach");
  return HVDS_INTERNAL_ERROR;
}
static hvds_result_t self_recv(hvds_p2p_t* p, int peer, void* buf, size_t bytes, uint64_t tag,
                               hvds_p2p_req_t** req) {
  return self_xfer(p, peer, buf, bytes, tag, req);
}
static hvds_result_t self_wait(hvds_p2p_t* p, hvds_p2p_req_t* req, int timeout_ms) {
  return HVDS_INTERNAL_ERROR;
}
static void self_abort(hvds_p2p_t* p) {}
static void self_destroy(hvds_p2p_t* p) { free(p); }
static const hvds_p2p_ops_t self_ops = {1, "self", self_xfer, self_recv, self_wait, self_abort,
                                        self_destroy, NULL, NULL, NULL};

static hvds_p2p_t* self_create(void) {
  hvds_p2p_t* p = calloc(1, sizeof(*p));
  if (p == NULL) return NULL;
  p->rank = 0;
  p->size = 1;
  p->ops = &self_ops;
  p->failed_peer = -1;
  return p;
}

/* ---- the store as the Gloo shim's key-value callbacks ---- */
static hvds_result_t kv_set(void* ctx, const char* key, const void* val, size_t len) {
  return hvds__store_set((hvds_store_t*)ctx, key, val, len);
}
static hvds_result_t kv_get(void* ctx, const char* key, int timeout_ms, void** val, size_t* len) {
  return hvds__store_get((hvds_store_t*)ctx, key, timeout_ms, val, len);
}

static uint64_t hash_str(const char* s) {
  uint64_t h = 1469598103934665603ull;
  for (; s && *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* This machine's kernel, as a hash of its boot id: network namespaces and containers of one
 * machine share it. 0 when it cannot be read. */
static uint64_t machine_id(void) {
  char id[64] = "";
  FILE* f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f == NULL) return 0;
  size_t n = fread(id, 1, sizeof id - 1, f);
  fclose(f);
  id[strcspn(id, "\n")] = '\0';
  return n > 0 ? hash_str(id) : 0;
}

/* Learns every rank's host, local rank and machine, builds the local and cross groups. */
static hvds_result_t build_groups(hvds_runtime_t* rt, const char* host) {
  int n = rt->size;
  int64_t* info = calloc((size_t)n * 4, sizeof(int64_t));
  size_t* bytes = calloc((size_t)n, sizeof(size_t));
  int* local = calloc((size_t)n, sizeof(int));
  int* cross = calloc((size_t)n, sizeof(int));
  hvds_result_t rc = HVDS_SYSTEM_ERROR;
  if (!info || !bytes || !local || !cross) goto done;
  info[rt->rank * 4 + 0] = (int64_t)hash_str(host);
  info[rt->rank * 4 + 1] = rt->local_rank;
  info[rt->rank * 4 + 2] = rt->local_size;
  info[rt->rank * 4 + 3] = (int64_t)machine_id();
  for (int r = 0; r < n; r++) bytes[r] = 4 * sizeof(int64_t);
  hvds_coll_opts_t o = {HVDS_TAG_INIT_GROUPS, HVDS_ALGO_AUTO, 0, 0};
  rc = hvds__allgatherv(rt->world, info, bytes, &o);
  if (rc != HVDS_SUCCESS) {
    hvds__set_error(rc, "exchanging host information failed: %s", rt->world->error);
    goto done;
  }
  int nl = 0, nc = 0;
  const int64_t* me = info + rt->rank * 4;
  rt->homogeneous = 1;
  rt->machine_ranks = 0;
  for (int r = 0; r < n; r++) {
    if (info[r * 4] == me[0]) local[nl++] = r;
    if (info[r * 4 + 1] == rt->local_rank) cross[nc++] = r;
    if (info[r * 4 + 2] != info[0 + 2]) rt->homogeneous = 0;
    if (me[3] != 0 && info[r * 4 + 3] == me[3]) rt->machine_ranks++;
  }
  rc = hvds__p2p_sub_create(rt->world, local, nl, HVDS_SPACE_LOCAL, &rt->local);
  if (rc == HVDS_SUCCESS)
    rc = hvds__p2p_sub_create(rt->world, cross, nc, HVDS_SPACE_CROSS, &rt->cross);
  if (rc != HVDS_SUCCESS) hvds__set_error(rc, "building the local and cross groups failed");
done:
  free(info);
  free(bytes);
  free(local);
  free(cross);
  return rc;
}

/* ---- start-up: one deadline, HVDSPARSE_START_TIMEOUT after init began, bounds every wait for
 * the store and for the other ranks ---- */
#define FAILED_START_LINGER_MS 2000

static int start_ms_left(hvds_runtime_t* rt) {
  int64_t left = rt->start_deadline_ms - hvds__now_ms();
  return left > 1 ? (int)left : 1;
}

/* What a start-up timeout adds to its error: the refused clients rank 0's store saw. */
static void refused_note(hvds_runtime_t* rt, char* out, size_t len) {
  int refused = hvds__launch_store_refused(rt->self_served);
  out[0] = '\0';
  if (refused > 0)
    snprintf(out, len,
             "; the rendezvous store refused %d connection%s, as it does a rank whose "
             "HVDSPARSE_SECRET differs from rank 0's (it must be the same on every rank)",
             refused, refused == 1 ? "" : "s");
}

/* addr:port is the store: the launcher's, or rank 0's own (open_self_served_store). */
static hvds_result_t connect_world(hvds_runtime_t* rt, const char* addr, int port) {
  const char* secret = hvds__param_str(HVDS_PARAM_SECRET);
  int start_ms = start_ms_left(rt);
  double start_s = hvds__param_dbl(HVDS_PARAM_START_TIMEOUT);
  int timeout_ms = (int)(hvds__param_dbl(HVDS_PARAM_GLOO_TIMEOUT_SECONDS) * 1000);
  char err[512] = "";
  if (addr == NULL || port <= 0)
    return hvds__set_error(HVDS_INVALID_USAGE,
                           "rank %d of %d: no rendezvous address; start the job with `hvdsparse "
                           "run` or set HVDSPARSE_GLOO_RENDEZVOUS_ADDR and _PORT",
                           rt->rank, rt->size);
  // An elastic worker connected already, to learn its identity (elastic_join.h).
  hvds_result_t rc = rt->store != NULL ? HVDS_SUCCESS
                                       : hvds__store_connect(addr, port, secret ? secret : "",
                                                             start_ms, &rt->store, err, sizeof(err));
  if (rc != HVDS_SUCCESS)
    return hvds__set_error(rc, "rank %d: cannot reach the rendezvous store at %s:%d: %s", rt->rank,
                           addr, port, err);
  char key[256];
  int64_t count;
  snprintf(key, sizeof(key), HVDS_KEY_ARRIVED, rt->job);
  hvds__store_add(rt->store, key, 1, &count);
  snprintf(key, sizeof(key), HVDS_KEY_ARRIVED_RANK, rt->job, rt->rank);
  hvds__store_set(rt->store, key, "1", 1);

  hvds_kv_t kv = {rt->store, kv_set, kv_get};
  if (hvds__param_int(HVDS_PARAM_ELASTIC))
    kv = (hvds_kv_t){rt, hvds__elastic_kv_set, hvds__elastic_kv_get};
  char prefix[256];
  snprintf(prefix, sizeof(prefix), HVDS_KEY_GEN_WORLD, rt->job, rt->generation);
  const char* iface = hvds__param_str(HVDS_PARAM_GLOO_IFACE);
  const char* transport = hvds__param_str(HVDS_PARAM_TRANSPORT);
  /* No interface named: listen where the store connection leaves from, so that a job whose
   * store is on another host never advertises loopback to it. */
  char own[64] = "";
  const char* host = NULL;
  if ((iface == NULL || iface[0] == '\0') &&
      hvds__store_local_addr(rt->store, own, sizeof own) == 0 && strncmp(own, "127.", 4) != 0)
    host = own;
  // Every rank must arrive within the start timeout (HVDSPARSE_START_TIMEOUT), not the
  // collectives' one.
  int connect_ms = start_ms_left(rt);
  const hvds_transport_t* tp = hvds__transport_find(transport);
  if (tp == NULL)
    return hvds__set_error(HVDS_INVALID_ARGUMENT, "rank %d: unknown HVDSPARSE_TRANSPORT '%s' (%s)",
                           rt->rank, transport, hvds__transport_names());
  rc = tp->create(&kv, prefix, rt->rank, rt->size, iface, host, connect_ms, &rt->world, err,
                  sizeof(err));
  // A wait for a peer's address ends early when the store itself went away: say that, not that
  // the peer never published.
  const char* lost = rc != HVDS_SUCCESS ? hvds__store_lost(rt->store) : NULL;
  if (lost != NULL)
    return hvds__set_error(rc,
                           "rank %d: lost the rendezvous store at %s:%d while waiting for the "
                           "other ranks: %s (the process serving it, the launcher or rank 0, "
                           "probably died)",
                           rt->rank, addr, port, lost);
  char note[256];
  refused_note(rt, note, sizeof(note));
  if (rc == HVDS_TIMEOUT)
    return hvds__set_error(rc,
                           "rank %d: not every rank reached rendezvous within the start "
                           "timeout (%g s, HVDSPARSE_START_TIMEOUT): %s%s",
                           rt->rank, start_s, err, note);
  if (rc != HVDS_SUCCESS)
    return hvds__set_error(rc, "rank %d: connecting to the other %d ranks failed: %s%s", rt->rank,
                           rt->size - 1, err, note);
  rt->world->timeout_ms = timeout_ms;
  return HVDS_SUCCESS;
}

/* ---- jobs started by mpirun, srun or a torchrun-style launcher (docs/launching.md) ---- */

/* Rank and size from the engine; what it does not give is filled by fill_engine_topology. */
static void adopt_engine_identity(hvds_runtime_t* rt, const hvds_launch_env_t* env) {
  rt->rank = env->rank;
  rt->size = env->size;
  rt->local_rank = env->local_rank;
  rt->local_size = env->local_size;
  rt->cross_rank = rt->cross_size = HVDS_LAUNCH_UNKNOWN;
  snprintf(rt->job, sizeof(rt->job), "%s", env->job_id);
}

/* Rank 0 serves the store and the others wait until it does; *addr and *port (pointing into
 * env) then say where connect_world finds it. A single rank needs no store: *addr is NULL. */
static hvds_result_t open_self_served_store(hvds_runtime_t* rt, const hvds_launch_env_t* env,
                                            const char** addr, int* port) {
  const char* engine = hvds__launch_engine_name(env->engine);
  *addr = NULL;
  if (rt->size == 1) return HVDS_SUCCESS;
  if (env->store_addr[0] == '\0' || env->store_port <= 0)
    return hvds__set_error(
        HVDS_INVALID_USAGE, "rank %d (started by %s): no address for the rendezvous store: %s",
        rt->rank, engine,
        env->problem[0] ? env->problem : "set HVDSPARSE_GLOO_RENDEZVOUS_ADDR and _PORT");
  const char* secret = hvds__param_str(HVDS_PARAM_SECRET);
  char err[512] = "";
  hvds_result_t rc = hvds__launch_store_open(env, secret ? secret : "", rt->generation,
                                             start_ms_left(rt), &rt->self_served, err, sizeof(err));
  if (rc != HVDS_SUCCESS)
    return hvds__set_error(rc, "rank %d (started by %s): rendezvous store at %s:%d: %s", rt->rank,
                           engine, env->store_addr, env->store_port, err);
  // Rank 0 reaches its own server on the address it listens on, loopback when that is all.
  const char* own = env->bind_addr[0] ? env->bind_addr : "127.0.0.1";
  *addr = rt->rank == 0 ? own : env->store_addr;
  *port = env->store_port;
  return HVDS_SUCCESS;
}

/* Local size and cross identity from every rank's host name, where the engine gave none. */
static hvds_result_t fill_engine_topology(hvds_runtime_t* rt, const hvds_launch_env_t* env) {
  hvds_topology_t t = {rt->local_rank, rt->local_size, HVDS_LAUNCH_UNKNOWN, HVDS_LAUNCH_UNKNOWN};
  hvds_result_t rc = hvds__launch_topology(rt->world, env->host, &t);
  if (rc != HVDS_SUCCESS)
    return hvds__set_error(rc, "rank %d: learning which ranks share a host failed: %s", rt->rank,
                           rt->world->error);
  rt->local_rank = t.local_rank;
  rt->local_size = t.local_size;
  rt->cross_rank = t.cross_rank;
  rt->cross_size = t.cross_size;
  return HVDS_SUCCESS;
}

/* Before the store connection closes: rank 0 keeps serving until every rank that reached it is
 * done with it (briefly when the job or its start failed: dead ranks never say so). */
static void close_self_served_store(hvds_runtime_t* rt) {
  int wait_ms = (int)(hvds__param_dbl(HVDS_PARAM_GLOO_TIMEOUT_SECONDS) * 1000);
  if ((rt->fatal[0] != '\0' || rt->bootstrap_failed) && wait_ms > FAILED_START_LINGER_MS)
    wait_ms = FAILED_START_LINGER_MS;
  hvds__launch_store_close(rt->self_served, rt->store, wait_ms);
  rt->self_served = NULL;
}

hvds_result_t hvds__bootstrap(hvds_runtime_t* rt) {
  rt->start_deadline_ms =
      hvds__now_ms() + (int64_t)(hvds__param_dbl(HVDS_PARAM_START_TIMEOUT) * 1000);
  rt->bootstrap_failed = 0;
  rt->rank = (int)hvds__param_int(HVDS_PARAM_RANK);
  rt->size = (int)hvds__param_int(HVDS_PARAM_SIZE);
  rt->local_rank = (int)hvds__param_int(HVDS_PARAM_LOCAL_RANK);
  rt->local_size = (int)hvds__param_int(HVDS_PARAM_LOCAL_SIZE);
  rt->cross_rank = (int)hvds__param_int(HVDS_PARAM_CROSS_RANK);
  rt->cross_size = (int)hvds__param_int(HVDS_PARAM_CROSS_SIZE);
  snprintf(rt->job, sizeof(rt->job), "%s", hvds__param_str(HVDS_PARAM_JOB_ID));
  const char* addr = hvds__param_str(HVDS_PARAM_RENDEZVOUS_ADDR);
  int port = (int)hvds__param_int(HVDS_PARAM_RENDEZVOUS_PORT);
  const char* host = hvds__param_str(HVDS_PARAM_HOSTNAME);
  // Started by another engine than `hvdsparse run`: its variables give the identity instead.
  hvds_launch_env_t env;
  hvds__launch_env_read(&env);
  if (env.engine == HVDS_ENGINE_UNRESOLVED || env.engine == HVDS_ENGINE_PMIX)
    return hvds__set_error(HVDS_INVALID_USAGE,
                           "this process cannot join the job (started by %s): %s",
                           hvds__launch_engine_name(env.engine), env.problem);
  int engine = env.engine != HVDS_ENGINE_NONE && env.engine != HVDS_ENGINE_HVDSPARSE;
  if (engine) {
    adopt_engine_identity(rt, &env);
    host = env.host;
  } else if (hvds__param_int(HVDS_PARAM_ELASTIC)) {
    hvds_result_t rc = hvds__elastic_join(rt, addr, port, host);
    if (rc != HVDS_SUCCESS) {
      rt->bootstrap_failed = 1;
      hvds__bootstrap_teardown(rt);
      return rc;
    }
    // The start-up deadline counts from the membership, not from the wait for it.
    rt->start_deadline_ms =
        hvds__now_ms() + (int64_t)(hvds__param_dbl(HVDS_PARAM_START_TIMEOUT) * 1000);
  }
  if (rt->size < 1 || rt->rank < 0 || rt->rank >= rt->size)
    return hvds__set_error(HVDS_INVALID_ARGUMENT, "invalid rank %d for size %d", rt->rank,
                           rt->size);
  hvds__log_set_rank(rt->rank);
  hvds_result_t rc = engine ? open_self_served_store(rt, &env, &addr, &port) : HVDS_SUCCESS;
  if (rc == HVDS_SUCCESS && rt->size == 1 && addr == NULL) {
    rt->world = self_create();
    rc = rt->world ? HVDS_SUCCESS : HVDS_SYSTEM_ERROR;
  } else if (rc == HVDS_SUCCESS) {
    rc = connect_world(rt, addr, port);
  }
  if (rc == HVDS_SUCCESS && engine) rc = fill_engine_topology(rt, &env);
  if (rc == HVDS_SUCCESS && rt->size > 1) rc = build_groups(rt, host);
  if (rc == HVDS_SUCCESS) rc = hvds__hier_setup(rt, host); /* binding, shared memory, hierarchy */
  if (rc == HVDS_SUCCESS && rt->size == 1) {
    rt->homogeneous = 1;
    int zero = 0;
    rc = hvds__p2p_sub_create(rt->world, &zero, 1, HVDS_SPACE_LOCAL, &rt->local);
    if (rc == HVDS_SUCCESS)
      rc = hvds__p2p_sub_create(rt->world, &zero, 1, HVDS_SPACE_CROSS, &rt->cross);
  }
  if (rc != HVDS_SUCCESS) {
    rt->bootstrap_failed = 1;
    hvds__bootstrap_teardown(rt);
  }
  return rc;
}

void hvds__bootstrap_teardown(hvds_runtime_t* rt) {
  hvds__p2p_destroy(rt->local);
  hvds__p2p_destroy(rt->cross);
  hvds__p2p_destroy(rt->world);
  rt->local = rt->cross = rt->world = NULL;
  close_self_served_store(rt);
  hvds__store_close(rt->store);
  rt->store = NULL;
}
