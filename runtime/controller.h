/* Negotiation (Horovod's controller): decides, identically on every member of a process set,
 * which tensors run this cycle. Steady state costs one bitwise-AND allreduce of a bit vector
 * (response-cache fast path); new or changed tensors go through the set's rank 0 (slow path). */
#ifndef HVDS_CONTROLLER_H_
#define HVDS_CONTROLLER_H_

#include "state.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One cycle for set s. want_shutdown says this rank asks to stop. On success *out holds the
 * fused responses (caller frees each and the array) and *shutdown whether any rank asked to
 * stop. A communication failure returns its code with the message in s->comm->error. */
hvds_result_t hvds__negotiate(hvds_pset_t* s, int want_shutdown, hvds_response_t** out,
                              int32_t* nout, int* shutdown);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_CONTROLLER_H_ */
