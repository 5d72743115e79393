/* Horovod's autotune of the fusion threshold and the cycle time (autotune.c). Cycle owner only. */
#ifndef HVDS_AUTOTUNE_H_
#define HVDS_AUTOTUNE_H_

#include "state.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reads the knobs; at init, after the runtime's own values are set. */
void hvds__autotune_init(void);
/* After every cycle, on every rank: bytes is what this cycle allreduced, start when it began.
 * Every SYNC cycles (the same cycle on every rank) rank 0's values are broadcast on world and
 * applied everywhere. A failure is the broadcast's. */
hvds_result_t hvds__autotune_cycle(hvds_pset_t* world, double start, double bytes);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_AUTOTUNE_H_ */
