/* Public API of gradient compression's local work: hvds_topk_feedback() checks its arguments and
 * runs the selection of ops/topk.c on the caller's thread. */
#include <stdint.h>

#include "state.h"
#include "topk.h"

hvds_result_t hvds_topk_feedback(void* acc, const void* grad, hvds_dtype_t dtype, int64_t n,
                                 const hvds_topk_plan_t* plan, void* indices,
                                 hvds_dtype_t index_dtype, void* values, int64_t* count,
                                 int32_t* exact) {
  if (!count || !plan)
    return hvds__set_error(HVDS_INVALID_ARGUMENT, "hvds_topk_feedback: %s is NULL",
                           plan ? "count" : "plan");
  *count = 0;
  if (dtype != HVDS_FLOAT32 && dtype != HVDS_FLOAT64)
    return hvds__set_error(HVDS_INVALID_ARGUMENT,
                           "hvds_topk_feedback: dtype %s is not supported (FLOAT32 or FLOAT64)",
                           hvds_dtype_name(dtype) ? hvds_dtype_name(dtype) : "unknown");
  if (index_dtype != HVDS_INT32 && index_dtype != HVDS_INT64)
    return hvds__set_error(HVDS_INVALID_ARGUMENT,
                           "hvds_topk_feedback: index dtype must be INT32 or INT64");
  if (n < 0 || (index_dtype == HVDS_INT32 && n > INT32_MAX))
    return hvds__set_error(HVDS_INVALID_ARGUMENT,
                           "hvds_topk_feedback: %lld elements do not fit %s indices", (long long)n,
                           n < 0 ? "any" : "INT32");
  if (plan->k < 0)
    return hvds__set_error(HVDS_INVALID_ARGUMENT, "hvds_topk_feedback: k = %lld is negative",
                           (long long)plan->k);
  if (plan->sample < 0 || (plan->sample > 0 && (plan->sample_rank < 1 ||
                                                plan->sample_rank > plan->sample)))
    return hvds__set_error(HVDS_INVALID_ARGUMENT,
                           "hvds_topk_feedback: sample_rank %lld outside [1, sample = %lld]",
                           (long long)plan->sample_rank, (long long)plan->sample);
  if (n > 0 && (!acc || (plan->k > 0 && (!indices || !values))))
    return hvds__set_error(HVDS_INVALID_ARGUMENT, "hvds_topk_feedback: %s is NULL",
                           !acc ? "acc" : !indices ? "indices" : "values");
  return hvds__topk_feedback(acc, grad, dtype, n, plan, indices, index_dtype, values, count,
                             exact);
}
