/* The message table on a set's rank 0: which requests every member sent, and the validated
 * responses they make (the slow path of negotiation, controller.h). */
#ifndef HVDS_TABLE_H_
#define HVDS_TABLE_H_

#include "state.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Set rank 0 only: adds the requests of one rank to the table and appends the responses that
 * became ready (validated) to *resps. */
hvds_result_t hvds__table_add(hvds_pset_t* s, hvds_request_t* reqs, int32_t n,
                              hvds_response_t** resps, int32_t* nresps, int32_t* cap);
/* Set rank 0: after every rank's requests were added, emits JOIN when all joined and names that
 * became ready because a rank joined. */
hvds_result_t hvds__table_finish(hvds_pset_t* s, hvds_response_t** resps, int32_t* nresps,
                                 int32_t* cap);
/* Frees every table record of s. */
void hvds__table_clear(hvds_pset_t* s);

/* Grows a response array; returns a pointer to a zeroed new slot or NULL. */
hvds_response_t* hvds__resp_push(hvds_response_t** resps, int32_t* n, int32_t* cap);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_TABLE_H_ */
