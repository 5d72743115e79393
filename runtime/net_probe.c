/* The network measured at init for the sparse cost model (net_probe.h), ZEN's seed, and the
 * sparse knobs.
 *
 * Protocol (world communicator, every rank, before the coordinator thread starts):
 *   1. broadcast from rank 0: {measure?, peer};
 *   2. rank 0 and the peer (the last rank) ping-pong: SMALL_REPS round trips of 8 bytes, then
 *      LARGE_REPS of LARGE_BYTES answered by 8 bytes; one warm-up of each first;
 *   3. broadcast from rank 0: {alpha, beta}.
 * alpha = median small round trip / 2; beta = (fastest large round trip - 2 alpha) / LARGE_BYTES.
 * On loopback this takes about a millisecond; over 1 Gbit/s about 40 ms (four 1 MiB sends).
 */
#include "net_probe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "collectives.h"
#include "cost_model.h"
#include "log.h"
#include "p2p.h"
#include "param.h"
#include "sparse_allreduce.h"
#include "state.h"
#include "tags.h"
#include "work_probe.h"

#define SMALL_REPS 9
#define LARGE_REPS 3
#define LARGE_BYTES ((size_t)1 << 20)
#define RING_WARMUP 2
#define RING_STEPS 16
#define LOAD_REPS 3

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* One round trip: rank 0 sends `bytes`, the peer answers with 8 bytes. Returns seconds. */
static hvds_result_t round_trip(hvds_p2p_t* p, int peer, char* buf, size_t bytes, uint64_t tag,
                                double* seconds) {
  double t0 = hvds__now();
  hvds_result_t rc;
  if (p->rank == 0) {
    rc = hvds__p2p_send(p, peer, buf, bytes, tag);
    if (rc == HVDS_SUCCESS) rc = hvds__p2p_recv(p, peer, buf, 8, tag);
  } else {
    rc = hvds__p2p_recv(p, 0, buf, bytes, tag);
    if (rc == HVDS_SUCCESS) rc = hvds__p2p_send(p, 0, buf, 8, tag);
  }
  *seconds = hvds__now() - t0;
  return rc;
}

/* Rank 0 and peer: the measurement itself. Only rank 0's results are used. */
static hvds_result_t ping_pong(hvds_p2p_t* p, int peer, double* alpha, double* beta) {
  char* buf = calloc(1, LARGE_BYTES);
  if (buf == NULL) return hvds__coll_nomem(p, "network probe");
  double small[SMALL_REPS + 1], large[LARGE_REPS + 1];
  hvds_result_t rc = HVDS_SUCCESS;
  uint64_t tag = HVDS_TAG_INIT_NET_PROBE + 1;
  for (int i = 0; i <= SMALL_REPS && rc == HVDS_SUCCESS; i++)
    rc = round_trip(p, peer, buf, 8, tag, &small[i]);
  for (int i = 0; i <= LARGE_REPS && rc == HVDS_SUCCESS; i++)
    rc = round_trip(p, peer, buf, LARGE_BYTES, tag, &large[i]);
  free(buf);
  if (rc != HVDS_SUCCESS) return rc;
  // Entry 0 of each is the warm-up.
  qsort(small + 1, SMALL_REPS, sizeof(double), cmp_double);
  qsort(large + 1, LARGE_REPS, sizeof(double), cmp_double);
  *alpha = small[1 + SMALL_REPS / 2] / 2;
  double wire = large[1] - 2 * *alpha;
  if (wire < large[1] / 2) wire = large[1] / 2;  // latency noise must not swallow the transfer
  *beta = wire / (double)LARGE_BYTES;
  return HVDS_SUCCESS;
}

hvds_result_t hvds__net_probe(hvds_p2p_t* world, double* alpha, double* beta) {
  double a_us = hvds__param_dbl(HVDS_PARAM_NET_ALPHA_US);
  double gbps = hvds__param_dbl(HVDS_PARAM_NET_GBPS);
  double v[2] = {HVDS_SPARSE_DEFAULT_ALPHA, HVDS_SPARSE_DEFAULT_BETA};
  hvds_coll_opts_t o = {HVDS_TAG_INIT_NET_PROBE, HVDS_ALGO_AUTO, 0, 0};
  hvds_result_t rc = HVDS_SUCCESS;
  if (world->size > 1) {
    // Step 1: whether to measure, and with whom (rank 0's view).
    int64_t plan[2] = {!(a_us > 0 && gbps > 0), world->size - 1};
    rc = hvds__broadcast(world, plan, sizeof plan, 0, &o);
    int in_pair = world->rank == 0 || world->rank == plan[1];
    if (rc == HVDS_SUCCESS && plan[0] && in_pair) rc = ping_pong(world, (int)plan[1], &v[0], &v[1]);
  }
  if (rc != HVDS_SUCCESS) return rc;
  if (world->rank == 0) {  // rank 0's overrides win everywhere
    if (a_us > 0) v[0] = a_us * 1e-6;
    if (gbps > 0) v[1] = 8.0 / (gbps * 1e9);
  }
  if (world->size > 1) {  // step 3: rank 0's values everywhere
    o.tag = HVDS_TAG_INIT_NET_PROBE + 2;
    rc = hvds__broadcast(world, v, sizeof v, 0, &o);
    if (rc != HVDS_SUCCESS) return rc;
  }
  *alpha = v[0];
  *beta = v[1];
  return HVDS_SUCCESS;
}

hvds_result_t hvds__round_probe(hvds_p2p_t* world, double alpha, double* round) {
  *round = 0;
  if (world->size <= 1) return HVDS_SUCCESS;
  int given = hvds__param_dbl(HVDS_PARAM_NET_ALPHA_US) > 0;
  hvds_coll_opts_t o = {HVDS_TAG_INIT_NET_PROBE + 4, HVDS_ALGO_AUTO, 0, 0};
  double v = 0;
  if (!given) {  // every rank sees the same setting: the launcher passes it to all
    int to = (world->rank + 1) % world->size, from = (world->rank + world->size - 1) % world->size;
    uint64_t out = 0, in = 0;
    double t0 = 0;
    for (int i = 0; i < RING_WARMUP + RING_STEPS; i++) {
      if (i == RING_WARMUP) t0 = hvds__now();
      hvds_result_t rc = hvds__p2p_sendrecv(world, to, &out, sizeof out, from, &in, sizeof in,
                                            HVDS_TAG_INIT_NET_PROBE + 5);
      if (rc != HVDS_SUCCESS) return rc;
    }
    v = (hvds__now() - t0) / RING_STEPS - alpha;
  }
  HVDS_CHECK(hvds__allreduce(world, &v, 1, HVDS_FLOAT64, HVDS_MAX, &o));
  *round = v > 0 ? v : 0;
  return HVDS_SUCCESS;
}

hvds_result_t hvds__load_probe(hvds_p2p_t* world, double alpha, double beta, double* loaded) {
  *loaded = beta;
  if (world->size <= 1 || hvds__param_dbl(HVDS_PARAM_NET_GBPS) > 0) return HVDS_SUCCESS;
  char* buf = malloc(2 * LARGE_BYTES);
  if (buf == NULL) return hvds__coll_nomem(world, "network probe");
  memset(buf, 0, LARGE_BYTES);
  int to = (world->rank + 1) % world->size, from = (world->rank + world->size - 1) % world->size;
  double fastest = 0;
  hvds_result_t rc = HVDS_SUCCESS;
  for (int i = 0; i <= LOAD_REPS && rc == HVDS_SUCCESS; i++) {  // i == 0: the warm-up
    double t0 = hvds__now();
    rc = hvds__p2p_sendrecv(world, to, buf, LARGE_BYTES, from, buf + LARGE_BYTES, LARGE_BYTES,
                            HVDS_TAG_INIT_NET_PROBE + 6);
    double t = hvds__now() - t0;
    if (i == 1 || (i > 1 && t < fastest)) fastest = t;
  }
  free(buf);
  if (rc != HVDS_SUCCESS) return rc;
  double v = (fastest - alpha) / (double)LARGE_BYTES;
  hvds_coll_opts_t o = {HVDS_TAG_INIT_NET_PROBE + 7, HVDS_ALGO_AUTO, 0, 0};
  rc = hvds__allreduce(world, &v, 1, HVDS_FLOAT64, HVDS_MAX, &o);
  if (rc != HVDS_SUCCESS) return rc;
  *loaded = v > beta ? v : beta;
  return HVDS_SUCCESS;
}

static uint64_t random_key(void) {
  uint64_t k = 0;
  if (getrandom(&k, sizeof k, GRND_NONBLOCK) != (ssize_t)sizeof k) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    k = ((uint64_t)ts.tv_nsec << 32) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 16);
  }
  return k != 0 ? k : 0x5a454e2d4b455931ULL;
}

hvds_result_t hvds__sparse_agree_seed(hvds_p2p_t* world, uint64_t* seed) {
  uint64_t k = world->rank == 0 ? random_key() : 0;
  if (world->size > 1) {
    hvds_coll_opts_t o = {HVDS_TAG_INIT_NET_PROBE + 3, HVDS_ALGO_AUTO, 0, 0};
    HVDS_CHECK(hvds__broadcast(world, &k, sizeof k, 0, &o));
  }
  *seed = k;
  return HVDS_SUCCESS;
}

hvds_result_t hvds__sparse_runtime_init(hvds_runtime_t* rt) {
  const char* algo = hvds__param_str(HVDS_PARAM_SPARSE_ALGORITHM);
  hvds_sparse_algo_t a = algo ? hvds__sparse_algo_from_name(algo) : HVDS_SPARSE_AUTO;
  if (a == HVDS_SPARSE_ALGO_COUNT) {
    HVDS_WARN(
        "HVDSPARSE_SPARSE_ALGORITHM=%s is not an algorithm (auto, dense, allgather, "
        "ssar_recursive_doubling, ssar_split_allgather, dsar_split_allgather, zen); the "
        "cost model picks",
        algo);
    a = HVDS_SPARSE_AUTO;
  }
  rt->sparse_algo = (int)a;
  rt->sparse_detect = hvds__param_int(HVDS_PARAM_SPARSE_DETECT) > 0;
  int pack = hvds__param_int(HVDS_PARAM_SPARSE_PACK_INDICES);
  rt->sparse_pack = pack < 0 ? 0 : pack > 0 ? 1 : -1;
  double t0 = hvds__now();
  hvds_result_t rc = hvds__net_probe(rt->world, &rt->net_alpha, &rt->net_beta);
  if (rc == HVDS_SUCCESS) rc = hvds__round_probe(rt->world, rt->net_alpha, &rt->net_round);
  if (rc == HVDS_SUCCESS)
    rc = hvds__load_probe(rt->world, rt->net_alpha, rt->net_beta, &rt->net_beta_loaded);
  if (rc == HVDS_SUCCESS) rc = hvds__sparse_agree_seed(rt->world, &rt->zen_seed);
  hvds_work_speed_t w = {0, 0, 0, 0};
  if (rc == HVDS_SUCCESS) rc = hvds__work_probe(rt->world, &w);
  rt->work_gamma = w.gamma, rt->work_hash = w.hash, rt->work_qenc = w.qenc, rt->work_qdec = w.qdec;
  if (rc != HVDS_SUCCESS)
    return hvds__set_error(rc, "rank %d: measuring the network failed: %s", rt->rank,
                           rt->world->error);
  HVDS_DEBUG(
      "for the sparse cost model: alpha %.2f us, %.3f GB/s (%.3f GB/s per rank with every rank "
      "sending), %.2f us more per round, "
      "%.2f ns per entry step, %.2f ns per hash, %.2f / %.2f ns to quantize / decode a value "
      "(probes %.1f ms)",
      rt->net_alpha * 1e6, 1e-9 / rt->net_beta, 1e-9 / rt->net_beta_loaded, rt->net_round * 1e6,
      rt->work_gamma * 1e9, rt->work_hash * 1e9, rt->work_qenc * 1e9, rt->work_qdec * 1e9,
      (hvds__now() - t0) * 1e3);
  return HVDS_SUCCESS;
}
