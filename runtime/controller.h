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

/* Set rank 0 only: adds the requests of one rank to the table and appends the responses that
 * became ready (validated) to *resps. */
hvds_result_t hvds__table_add(hvds_pset_t* s, hvds_request_t* reqs, int32_t n,
                              hvds_response_t** resps, int32_t* nresps, int32_t* cap);
/* Set rank 0: after every rank's requests were added, emits JOIN when all joined and names that
 * became ready because a rank joined. */
hvds_result_t hvds__table_finish(hvds_pset_t* s, hvds_response_t** resps, int32_t* nresps,
                                 int32_t* cap);
/* Set rank 0: warns about (and after the shutdown time fails) tensors some ranks never sent. */
void hvds__stall_check(hvds_pset_t* s, hvds_response_t** resps, int32_t* nresps, int32_t* cap);
/* Frees every table record of s. */
void hvds__table_clear(hvds_pset_t* s);

/* Grows a response array; returns a pointer to a zeroed new slot or NULL. */
hvds_response_t* hvds__resp_push(hvds_response_t** resps, int32_t* n, int32_t* cap);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_CONTROLLER_H_ */
