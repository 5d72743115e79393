/* The speed of the sparse algorithms' local work, for the cost model (ops/sparse/cost_model.h):
 * measured once at init on every rank at the same time, so that cores shared by several ranks
 * show in it; the slowest rank's figures are taken everywhere (a collective waits for that rank,
 * and every rank must price alike). */
#ifndef HVDS_WORK_PROBE_H_
#define HVDS_WORK_PROBE_H_

#include "p2p.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  double gamma; /* seconds per radix-sort entry step */
  double hash;  /* seconds per keyed hash */
  double qenc;  /* seconds to quantize one float32 value at 4 bits */
  double qdec;  /* seconds to decode one */
} hvds_work_speed_t;

/* Fills *w; all 0 when HVDSPARSE_SPARSE_LOCAL_WORK=0 (the model then prices bytes and messages
 * only). */
hvds_result_t hvds__work_probe(hvds_p2p_t* world, hvds_work_speed_t* w /* OUT */);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_WORK_PROBE_H_ */
