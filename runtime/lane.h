/* The ordered fast lane: operations that every rank submits in the same order by construction
 * (DeAR's reduce-scatters and all-gathers) skip per-tensor negotiation. The k-th ordered
 * operation of a set is the same operation on every rank; the cycle's bit vector carries how many
 * each rank has queued and a fingerprint of each prefix, so one AND tells every rank how many can
 * run and whether they really match. A mismatch fails the operation at that position on every
 * rank with an error that names this rank's operation; the runtime stays usable. */
#ifndef HVDS_LANE_H_
#define HVDS_LANE_H_

#include <stdint.h>

#include "state.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HVDS_LANE_MAX 8                         /* ordered operations one cycle can run */
#define HVDS_LANE_WORDS (1 + 2 * HVDS_LANE_MAX) /* count, then each prefix's fingerprint and its
                                                   complement */

/* Appends a popped ordered entry to the set's lane (the entry is also in s->pending). */
void hvds__lane_push(hvds_pset_t* s, hvds_entry_t* e);

/* This rank's lane words of the bit vector (ANDed across the set). */
void hvds__lane_fill(const hvds_pset_t* s, uint64_t* words);

/* After the AND: appends in order a response for every ordered operation all ranks agree on,
 * fails the lane when the fingerprints differ or a rank has joined (any_joined), and warns or
 * fails when the head has waited past the stall times. Returns HVDS_SYSTEM_ERROR when out of
 * memory. */
hvds_result_t hvds__lane_take(hvds_pset_t* s, const uint64_t* words, int any_joined,
                              hvds_response_t** items, int32_t* n, int32_t* cap);

/* Forgets the lane (its entries are finished through s->pending). */
void hvds__lane_clear(hvds_pset_t* s);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_LANE_H_ */
