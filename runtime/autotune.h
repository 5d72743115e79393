/* Horovod's autotune of the fusion threshold and the cycle time (autotune.c). Cycle owner only. */
#ifndef HVDS_AUTOTUNE_H_
#define HVDS_AUTOTUNE_H_

#include "state.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hvds_autotune hvds_autotune_t; /* the tuner's state, rt->autotune */

/* Reads the knobs; at init, after the runtime's own values are set. Allocates rt->autotune when
 * tuning is on; fails only when that allocation does (message recorded). */
hvds_result_t hvds__autotune_init(hvds_runtime_t* rt);
/* Frees rt->autotune (at shutdown; accepts a runtime that never tuned). */
void hvds__autotune_free(hvds_runtime_t* rt);
/* After every cycle, on every rank: bytes is what this cycle allreduced, start when it began.
 * Every SYNC cycles (the same cycle on every rank) rank 0's values are broadcast on world and
 * applied everywhere. A failure is the broadcast's. */
hvds_result_t hvds__autotune_cycle(hvds_pset_t* world, double start, double bytes);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_AUTOTUNE_H_ */
