/* Allreduce dispatch over the registry of dense algorithms.
 *
 * Selection: a forced o->algorithm wins; otherwise recursive halving/doubling for buffers up to
 * rhd_max_bytes (latency-bound: 2 log2(P) steps) and the ring above (bandwidth-bound: each rank
 * moves 2 (P-1)/P of the buffer whatever P is). The default switch point, 256 KiB, is a
 * placeholder: timing the two over the in-process test transport says nothing about a network,
 * so the runtime measures the real crossover over TCP at init and passes it in rhd_max_bytes.
 */
#include <stdio.h>
#include <string.h>

#include "collectives.h"
#include "reduce.h"

static const hvds_allreduce_algo_info_t kAlgos[] = {
    {HVDS_ALGO_RING, "ring", hvds__allreduce_ring},
    {HVDS_ALGO_RHD, "rhd", hvds__allreduce_rhd},
};

#define NUM_ALGOS (sizeof kAlgos / sizeof kAlgos[0])

const hvds_allreduce_algo_info_t* hvds__allreduce_algo_info(hvds_algo_t a) {
  for (size_t i = 0; i < NUM_ALGOS; i++)
    if (kAlgos[i].id == a) return &kAlgos[i];
  return NULL;
}

hvds_algo_t hvds__allreduce_algo_from_name(const char* name) {
  if (name == NULL || strcmp(name, "auto") == 0) return HVDS_ALGO_AUTO;
  for (size_t i = 0; i < NUM_ALGOS; i++)
    if (strcmp(kAlgos[i].name, name) == 0) return kAlgos[i].id;
  return HVDS_ALGO_COUNT;
}

static hvds_algo_t pick(size_t bytes, const hvds_coll_opts_t* o) {
  if (o != NULL && o->algorithm != HVDS_ALGO_AUTO) return o->algorithm;
  size_t rhd_max =
      (o != NULL && o->rhd_max_bytes > 0) ? o->rhd_max_bytes : HVDS_COLL_DEFAULT_RHD_MAX_BYTES;
  return bytes <= rhd_max ? HVDS_ALGO_RHD : HVDS_ALGO_RING;
}

const char* hvds__allreduce_choice(const hvds_p2p_t* p, size_t bytes, const hvds_coll_opts_t* o) {
  const hvds_allreduce_algo_info_t* info = hvds__allreduce_algo_info(pick(bytes, o));
  return info != NULL ? info->name : "unknown";
}

hvds_result_t hvds__allreduce(hvds_p2p_t* p, void* buf, size_t count, hvds_dtype_t dtype,
                              hvds_reduce_op_t op, const hvds_coll_opts_t* o) {
  hvds_result_t rc = hvds__coll_check(p, dtype, op);
  if (rc != HVDS_SUCCESS) return rc;
  hvds_algo_t a = pick(count * hvds__dtype_bytes(dtype), o);
  const hvds_allreduce_algo_info_t* info = hvds__allreduce_algo_info(a);
  if (info == NULL) {
    snprintf(p->error, sizeof p->error, "unknown allreduce algorithm %d", (int)a);
    return HVDS_INVALID_ARGUMENT;
  }
  return info->run(p, buf, count, dtype, op, o);
}
