/* Top-k selection with error feedback on host memory: Compression.topk's CPU path
 * (docs/compression.md). The public entry is hvds_topk_feedback() (hvdsparse.h), which checks
 * its arguments and calls hvds__topk_feedback().
 *
 * One call: acc += grad (grad may be NULL), then the k entries of acc largest in magnitude are
 * copied out in increasing index order and zeroed in acc (error feedback: acc keeps what was not
 * sent). Ties at the k-th magnitude go to the lower indices. Zeros are never selected, so fewer
 * than k entries come back when acc holds fewer than k non-zeros.
 *
 * Magnitudes compare as the integers of their bit patterns with the sign cleared (a NaN ranks
 * above infinity, so a broken gradient is always sent). With a sample (plan->sample > 0) the
 * threshold is the plan->sample_rank-th largest magnitude among plan->sample entries of
 * acc + grad, read as runs of 16 neighbours that start at random places (splitmix64 of
 * plan->seed; a cache miss per run, not per entry); one fused pass adds, stores and collects
 * the entries at or above it with their magnitudes and values, and a radix selection among
 * those candidates (each pass keeping only the chosen bucket) picks k. When the candidates are
 * fewer than k (an unlucky sample) or more than a buffer of 3k + 1024 holds, and without a
 * sample, the selection is exact over all of acc: a radix selection of 11 bits per pass
 * (3 passes for float32, 6 for float64), then one collecting pass. Either way the result is the
 * exact top k; only the time differs.
 */
#ifndef HVDS_TOPK_H_
#define HVDS_TOPK_H_

#include <stdint.h>

#include "hvdsparse.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Candidates the sampled path keeps before it gives up for the exact selection. */
int64_t hvds__topk_candidate_cap(int64_t k);

/* See above. dtype HVDS_FLOAT32 or HVDS_FLOAT64 (acc, grad and values); index_dtype HVDS_INT32
 * (n <= INT32_MAX) or HVDS_INT64; indices and values hold k entries. *count receives the number
 * selected (min(k, non-zeros of acc)); *exact, when non-NULL, 1 when the exact selection ran.
 * Arguments are not checked here. HVDS_SYSTEM_ERROR when the candidate buffer cannot be
 * allocated (acc is then acc + grad, nothing selected). */
hvds_result_t hvds__topk_feedback(void* acc, const void* grad, hvds_dtype_t dtype, int64_t n,
                                  const hvds_topk_plan_t* plan, void* indices,
                                  hvds_dtype_t index_dtype, void* values, int64_t* count,
                                  int32_t* exact);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_TOPK_H_ */
