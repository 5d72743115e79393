/* Allreduce dispatch, plus the small helpers every algorithm file shares.
 *
 * Selection: a forced o->algorithm wins; otherwise recursive halving/doubling for buffers up to
 * rhd_max_bytes (latency-bound: 2 log2(P) steps) and the ring above (bandwidth-bound: each rank
 * moves 2 (P-1)/P of the buffer whatever P is). The default switch point, 256 KiB, is a
 * placeholder: timing the two over the in-process test transport says nothing about a network,
 * so the runtime measures the real crossover over TCP at init and passes it in rhd_max_bytes.
 */
#include <stdio.h>

#include "collectives.h"
#include "reduce.h"

size_t hvds__coll_segment(const hvds_coll_opts_t* o, size_t esize) {
  size_t chunk = (o != NULL && o->chunk_bytes > 0) ? o->chunk_bytes : HVDS_COLL_DEFAULT_CHUNK_BYTES;
  if (esize == 0) esize = 1;
  chunk -= chunk % esize;
  return chunk > 0 ? chunk : esize;
}

size_t hvds__coll_ring_segment(size_t bytes, int P, double beta) {
  const size_t lo = (size_t)256 << 10, hi = (size_t)1 << 20;
  size_t cap = hi;
  if (beta > 0) {
    double in_2ms = 2e-3 / beta;
    cap = in_2ms >= (double)hi ? hi : in_2ms <= (double)lo ? lo : (size_t)in_2ms & ~(size_t)0xffff;
  }
  size_t seg = bytes / (size_t)(P > 0 ? P : 1) / 4;
  return seg < lo ? lo : seg > cap ? cap : seg;
}

hvds_result_t hvds__coll_check(hvds_p2p_t* p, hvds_dtype_t dtype, hvds_reduce_op_t op) {
  if (hvds__dtype_bytes(dtype) == 0) {
    snprintf(p->error, sizeof p->error, "unknown dtype %d", (int)dtype);
    return HVDS_INVALID_ARGUMENT;
  }
  // A zero-length reduce only looks the kernel up.
  hvds_result_t rc = hvds__reduce(NULL, NULL, 0, dtype, op);
  if (rc != HVDS_SUCCESS)
    snprintf(p->error, sizeof p->error, "reduce op %d is not supported for dtype %d", (int)op,
             (int)dtype);
  return rc;
}

hvds_result_t hvds__coll_nomem(hvds_p2p_t* p, const char* what) {
  snprintf(p->error, sizeof p->error, "%s: out of memory", what);
  return HVDS_SYSTEM_ERROR;
}

static hvds_algo_t pick(const hvds_p2p_t* p, size_t bytes, const hvds_coll_opts_t* o) {
  if (o != NULL && o->algorithm != HVDS_ALGO_AUTO) return o->algorithm;
  size_t rhd_max =
      (o != NULL && o->rhd_max_bytes > 0) ? o->rhd_max_bytes : HVDS_COLL_DEFAULT_RHD_MAX_BYTES;
  return bytes <= rhd_max ? HVDS_ALGO_RHD : HVDS_ALGO_RING;
}

const char* hvds__allreduce_choice(const hvds_p2p_t* p, size_t bytes, const hvds_coll_opts_t* o) {
  return pick(p, bytes, o) == HVDS_ALGO_RHD ? "rhd" : "ring";
}

hvds_result_t hvds__allreduce(hvds_p2p_t* p, void* buf, size_t count, hvds_dtype_t dtype,
                              hvds_reduce_op_t op, const hvds_coll_opts_t* o) {
  hvds_result_t rc = hvds__coll_check(p, dtype, op);
  if (rc != HVDS_SUCCESS) return rc;
  switch (pick(p, count * hvds__dtype_bytes(dtype), o)) {
    case HVDS_ALGO_RHD:
      return hvds__allreduce_rhd(p, buf, count, dtype, op, o);
    case HVDS_ALGO_RING:
      return hvds__allreduce_ring(p, buf, count, dtype, op, o);
    default:
      snprintf(p->error, sizeof p->error, "unknown allreduce algorithm %d", (int)o->algorithm);
      return HVDS_INVALID_ARGUMENT;
  }
}
