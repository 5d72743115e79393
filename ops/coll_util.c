/* The small helpers every collective algorithm file shares (collectives.h). */
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

size_t hvds__coll_rhd_max_for_link(double beta) {
  const double wire_bound = 8.0 / 4e9;  // seconds per byte at 4 Gbit/s
  return beta >= wire_bound ? (size_t)64 << 10 : (size_t)1 << 20;
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
