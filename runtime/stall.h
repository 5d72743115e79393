/* The stall inspector on a set's rank 0 (Horovod's): names the ranks a tensor waits for. */
#ifndef HVDS_STALL_H_
#define HVDS_STALL_H_

#include "state.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Set rank 0: warns about (and after the shutdown time fails) tensors some ranks never sent. */
void hvds__stall_check(hvds_pset_t* s, hvds_response_t** resps, int32_t* nresps, int32_t* cap);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_STALL_H_ */
