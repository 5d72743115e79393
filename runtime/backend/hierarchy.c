/* The host hierarchy at init: worker binding, the shared-memory transport for the ranks of a
 * host, and the choice between the flat and the hierarchical allreduce.
 *
 * Cost model (docs/hierarchy.md). With P ranks, L per host, H hosts, an allreduce of N bytes
 * costs, with alpha the latency and beta the seconds per byte of the local (l) and cross (c)
 * links, and s(n, N) the steps of an n-rank allreduce (2 log2 n up to RHD_MAX_BYTES, else
 * 2 (n - 1)):
 *   flat:  s(P, N) alpha_c + 2 (P-1)/P N beta_c   (the ring's slowest hops cross hosts)
 *   local: s(L, N) alpha_l + 2 (L-1)/L N beta_l   (local reduce-scatter and all-gather)
 *   cross: s(H, N/L) alpha_c + 2 (H-1)/H N beta_c (the L shard allreduces share the host's link)
 *   hier:  local + cross; with two hosts, whose phases are pipelined in K chunks,
 *          max(local, cross) + (local + cross) / K
 * The four constants are measured once at init by a ping-pong of 8 bytes and of 1 MiB between
 * local ranks 0 and 1 of every host and between hosts 0 and 1 over the local-rank-0 cross
 * group, then made identical on every rank (the slowest host's, by an allreduce of maxima), so
 * every rank takes the same decision for every allreduce.
 */
#include "hierarchy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "p2p.h"
#include "param.h"
#include "process_set.h"
#include "shm_p2p.h"
#include "store.h"
#include "store_keys.h"
#include "tags.h"
#include "topology.h"
#include "transports.h"

#define PROBE_BIG ((size_t)1 << 20)

static hvds_result_t kv_set(void* ctx, const char* key, const void* val, size_t len) {
  return hvds__store_set((hvds_store_t*)ctx, key, val, len);
}
static hvds_result_t kv_get(void* ctx, const char* key, int timeout_ms, void** val, size_t* len) {
  return hvds__store_get((hvds_store_t*)ctx, key, timeout_ms, val, len);
}

/* With every rank on this host, the shared-memory communicator becomes the world: the TCP mesh
 * is closed once every rank is past its last use of it (the barrier). */
static hvds_result_t become_world(hvds_runtime_t* rt, hvds_p2p_t* shm) {
  hvds_coll_opts_t o = {HVDS_TAG_LOCAL_BARRIER, HVDS_ALGO_AUTO, 0, 0};
  hvds_result_t rc = hvds__barrier(shm, &o);
  if (rc != HVDS_SUCCESS) {
    hvds__set_error(rc, "rank %d: shared memory barrier failed: %s", rt->rank, shm->error);
    hvds__p2p_destroy(shm);
    return rc;
  }
  hvds__p2p_destroy(rt->local);
  hvds__p2p_destroy(rt->cross);
  hvds__p2p_destroy(rt->world);
  rt->world = shm;
  rt->local = rt->cross = NULL;
  int* all = malloc((size_t)rt->size * sizeof(int));
  if (all == NULL) return hvds__set_error(HVDS_SYSTEM_ERROR, "out of memory");
  for (int r = 0; r < rt->size; r++) all[r] = r;
  rc = hvds__p2p_sub_create(rt->world, all, rt->size, HVDS_SPACE_LOCAL, &rt->local);
  if (rc == HVDS_SUCCESS)
    rc = hvds__p2p_sub_create(rt->world, &rt->rank, 1, HVDS_SPACE_CROSS, &rt->cross);
  free(all);
  if (rc != HVDS_SUCCESS) return hvds__set_error(rc, "building the local and cross groups failed");
  HVDS_INFO("every rank is on this host: the world communicator is shared memory");
  return HVDS_SUCCESS;
}

/* Where shared memory went (setup_shm). */
typedef enum { SHM_NONE, SHM_LOCAL, SHM_WORLD } shm_place_t;

/* Replaces the TCP view rt->local by shared memory when every rank of the host attached, and
 * the world too when every rank is on this host and the transport allows it. */
static hvds_result_t setup_shm(hvds_runtime_t* rt, const char* host, shm_place_t* place) {
  *place = SHM_NONE;
  if (hvds__param_int(HVDS_PARAM_SHM) == 0 || rt->local == NULL || rt->local->size < 2)
    return HVDS_SUCCESS;
  hvds_kv_t kv = {rt->store, kv_set, kv_get};
  char prefix[512], err[512] = "";
  snprintf(prefix, sizeof prefix, HVDS_KEY_GEN_SHM, rt->job, rt->generation, host ? host : "");
  hvds_shm_options_t so = HVDS_SHM_OPTIONS_INIT;
  so.ring_bytes = (size_t)hvds__param_int(HVDS_PARAM_SHM_RING_BYTES);
  so.poll_us = (int)hvds__param_int(HVDS_PARAM_SHM_POLL_US);
  int start_ms = (int)(hvds__param_dbl(HVDS_PARAM_START_TIMEOUT) * 1000);
  hvds_p2p_t* shm = NULL;
  hvds_result_t rc = hvds__shm_p2p_create_opts(&kv, prefix, rt->local->rank, rt->local->size,
                                               start_ms, &so, &shm, err, sizeof err);
  // Every rank of the host must have it, else they all keep TCP.
  int32_t ok = rc == HVDS_SUCCESS;
  hvds_coll_opts_t o = {HVDS_TAG_LOCAL_AGREE, HVDS_ALGO_AUTO, 0, 0};
  hvds_result_t arc = hvds__allreduce(rt->local, &ok, 1, HVDS_INT32, HVDS_MIN, &o);
  if (arc != HVDS_SUCCESS) {
    hvds__p2p_destroy(shm);
    return hvds__set_error(arc, "rank %d: agreeing on shared memory failed: %s", rt->rank,
                           rt->local->error);
  }
  if (!ok) {
    if (rc != HVDS_SUCCESS) HVDS_WARN("shared memory transport unavailable (%s); using TCP", err);
    hvds__p2p_destroy(shm);
    return HVDS_SUCCESS;
  }
  shm->timeout_ms = rt->world->timeout_ms;
  const hvds_transport_t* tp = hvds__transport_find(hvds__param_str(HVDS_PARAM_TRANSPORT));
  if (rt->local->size == rt->size && tp != NULL && tp->shm_may_replace) {
    rc = become_world(rt, shm);
    *place = rc == HVDS_SUCCESS ? SHM_WORLD : SHM_NONE;
    return rc;
  }
  hvds__p2p_destroy(rt->local);
  rt->local = shm;
  *place = SHM_LOCAL;
  return HVDS_SUCCESS;
}

/* Steps of an n-rank allreduce of bytes on a link of beta s/byte: halving-doubling up to the
 * switch point (the knob, else the ops' rule for that link), else ring. */
static double steps(hvds_runtime_t* rt, int n, size_t bytes, double beta) {
  if (n <= 1) return 0;
  size_t rhd_max =
      rt->rhd_max_bytes >= 0 ? (size_t)rt->rhd_max_bytes : hvds__coll_rhd_max_for_link(beta);
  return bytes <= rhd_max ? 2 * ceil(log2((double)n)) : 2.0 * (n - 1);
}

/* The smallest power of two from 1 KiB to 1 GiB the model sends hierarchically, or 0. */
static size_t crossover(hvds_runtime_t* rt) {
  for (size_t b = 1024; b <= ((size_t)1 << 30); b *= 2)
    if (hvds__hier_cost_hier(rt, b) < hvds__hier_cost_flat(rt, b)) return b;
  return 0;
}

double hvds__hier_cost_flat(hvds_runtime_t* rt, size_t bytes) {
  int P = rt->size;
  return steps(rt, P, bytes, rt->hier_cost[3]) * rt->hier_cost[2] +
         2.0 * (P - 1) / P * (double)bytes * rt->hier_cost[3];
}

double hvds__hier_cost_hier(hvds_runtime_t* rt, size_t bytes) {
  int L = rt->local ? rt->local->size : 1, H = rt->cross ? rt->cross->size : 1;
  double local = steps(rt, L, bytes, rt->hier_cost[1]) * rt->hier_cost[0] +
                 2.0 * (L - 1) / L * (double)bytes * rt->hier_cost[1];
  double cross = steps(rt, H, bytes / (size_t)L, rt->hier_cost[3]) * rt->hier_cost[2] +
                 2.0 * (H - 1) / H * (double)bytes * rt->hier_cost[3];
  if (H != 2) return local + cross;
  // Two hosts are pipelined in chunks of L MiB (execute_hier.c): c chunks through two stages
  // take one chunk's both stages plus c - 1 chunks of the slower stage. (It was priced as the
  // slower stage plus a whole chunk of both, which left 4 MiB flat at 2 hosts x 2 although
  // hierarchical took 39.5 ms against 54.9: this formula gives 39 and 50.)
  double c = ceil((double)bytes / ((double)L * 1048576.0));
  if (c < 1) c = 1;
  return (local + cross) / c + (c - 1) / c * (local > cross ? local : cross);
}

/* Ping-pong of bytes between ranks 0 and 1 of p: the least one-way time of reps, seen by rank
 * 0; 0 on the other ranks. */
static hvds_result_t pingpong(hvds_p2p_t* p, void* buf, size_t bytes, int reps, double* t) {
  *t = 0;
  if (p->rank > 1) return HVDS_SUCCESS;
  hvds_result_t rc = HVDS_SUCCESS;
  for (int i = 0; i < reps && rc == HVDS_SUCCESS; i++) {
    double t0 = hvds__now();
    if (p->rank == 0) {
      rc = hvds__p2p_send(p, 1, buf, bytes, HVDS_TAG_LOCAL_PROBE);
      if (rc == HVDS_SUCCESS) rc = hvds__p2p_recv(p, 1, buf, bytes, HVDS_TAG_LOCAL_PROBE);
      double one_way = (hvds__now() - t0) / 2;
      if (rc == HVDS_SUCCESS && (*t == 0 || one_way < *t)) *t = one_way;
    } else {
      rc = hvds__p2p_recv(p, 0, buf, bytes, HVDS_TAG_LOCAL_PROBE);
      if (rc == HVDS_SUCCESS) rc = hvds__p2p_send(p, 0, buf, bytes, HVDS_TAG_LOCAL_PROBE);
    }
  }
  return rc;
}

/* alpha and beta of one link kind, measured by ranks 0 and 1 of p (zeros elsewhere). */
static hvds_result_t probe_link(hvds_p2p_t* p, void* buf, double* alpha, double* beta) {
  double small = 0, big = 0;
  hvds_result_t rc = pingpong(p, buf, 8, 5, &small);
  if (rc == HVDS_SUCCESS) rc = pingpong(p, buf, PROBE_BIG, 3, &big);
  *alpha = small;
  *beta = big > small ? (big - small) / (double)(PROBE_BIG - 8) : 0;
  return rc;
}

/* Measures rt->hier_cost: local links on every host, the cross link of local rank 0. */
static hvds_result_t probe_costs(hvds_runtime_t* rt) {
  char* buf = calloc(1, PROBE_BIG);
  if (buf == NULL) return hvds__set_error(HVDS_SYSTEM_ERROR, "out of memory");
  double c[4] = {0, 0, 0, 0};
  hvds_result_t rc = probe_link(rt->local, buf, &c[0], &c[1]);
  if (rc == HVDS_SUCCESS && rt->local->rank == 0) rc = probe_link(rt->cross, buf, &c[2], &c[3]);
  free(buf);
  if (rc != HVDS_SUCCESS)
    return hvds__set_error(rc, "rank %d: measuring the local and cross links failed: %s", rt->rank,
                           rt->local->error[0] ? rt->local->error : rt->cross->error);
  hvds_coll_opts_t o = {HVDS_TAG_LOCAL_PROBE, HVDS_ALGO_AUTO, 0, 0};
  rc = hvds__allreduce(rt->world, c, 4, HVDS_FLOAT64, HVDS_MAX, &o);
  if (rc != HVDS_SUCCESS)
    return hvds__set_error(rc, "rank %d: sharing the link measurements failed: %s", rt->rank,
                           rt->world->error);
  memcpy(rt->hier_cost, c, sizeof c);
  HVDS_INFO(
      "links: local %.1f us + %.2f GB/s, cross %.1f us + %.2f GB/s; hierarchical allreduce "
      "from %zu bytes (0: never)",
      c[0] * 1e6, c[1] > 0 ? 1e-9 / c[1] : 0.0, c[2] * 1e6, c[3] > 0 ? 1e-9 / c[3] : 0.0,
      crossover(rt));
  return HVDS_SUCCESS;
}

/* Decides rt->hier_mode from where shared memory went; measures the links when the choice is
 * left to the cost model. */
static hvds_result_t choose_mode(hvds_runtime_t* rt, shm_place_t place) {
  rt->hier_mode = HVDS_HIER_FLAT;
  if (rt->size < 2 || rt->local == NULL || rt->cross == NULL) return HVDS_SUCCESS;
  int L = rt->local->size, H = rt->cross->size;
  if (place == SHM_WORLD) {
    rt->hier_mode = HVDS_HIER_SHM_WORLD;  // every rank on this host
    return HVDS_SUCCESS;
  }
  if (L == rt->size && place == SHM_LOCAL) {
    rt->hier_mode = HVDS_HIER_LOCAL_ONLY;  // TRANSPORT=gloo world, every rank on this host
    return HVDS_SUCCESS;
  }
  int set = hvds__param_is_set(HVDS_PARAM_HIERARCHICAL_ALLREDUCE);
  long long knob = hvds__param_int(HVDS_PARAM_HIERARCHICAL_ALLREDUCE);
  if (set && knob == 0) return HVDS_SUCCESS;
  // Every host must hold the same number of ranks: local rank i's shard meets the shards of
  // local rank i elsewhere. (Decided on data every rank shares.)
  if (L < 2 || H < 2 || !rt->homogeneous || L * H != rt->size) {
    if (set && knob > 0)
      HVDS_INFO(
          "hierarchical allreduce needs several hosts with the same number of ranks each "
          "(%d hosts of %d ranks here); the allreduce stays flat",
          H, L);
    return HVDS_SUCCESS;
  }
  if (set && knob > 0) {
    rt->hier_mode = HVDS_HIER_ALWAYS;
    return HVDS_SUCCESS;
  }
  rt->hier_mode = HVDS_HIER_AUTO;
  return probe_costs(rt);
}

hvds_result_t hvds__hier_setup(hvds_runtime_t* rt, const char* host) {
  memset(rt->hier_cost, 0, sizeof rt->hier_cost);
  rt->hier_mode = HVDS_HIER_FLAT;
  char err[256] = "";
  const char* bind = hvds__param_str(HVDS_PARAM_BIND_TO);
  if (hvds__topo_bind_self(bind, rt->local_rank, rt->local_size, err, sizeof err) != HVDS_SUCCESS)
    HVDS_WARN("--bind-to %s: %s; this worker is not bound", bind ? bind : "", err);
  if (rt->size < 2) return HVDS_SUCCESS;
  shm_place_t place;
  hvds_result_t rc = setup_shm(rt, host, &place);
  if (rc == HVDS_SUCCESS) rc = choose_mode(rt, place);
  return rc;
}
