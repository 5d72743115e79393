/* Public API of gradient compression's local work: hvds_topk_feedback() checks its arguments and
 * runs the selection of ops/topk.c on the caller's thread; hvds_topk_feedback_device() queues the
 * device library's kernel on the caller's stream. */
#include <stdint.h>

#include "device_library.h"
#include "dtype.h"
#include "state.h"
#include "topk.h"

/* The checks both selections share; fn names the entry in the error. */
static hvds_result_t check_topk(const char* fn, const void* acc, hvds_dtype_t dtype, int64_t n,
                                int64_t k, const void* indices, hvds_dtype_t index_dtype,
                                const void* values) {
  if (dtype != HVDS_FLOAT32 && dtype != HVDS_FLOAT64)
    return hvds__set_error(HVDS_INVALID_ARGUMENT,
                           "%s: dtype %s is not supported (FLOAT32 or FLOAT64)", fn,
                           hvds__dtype_name(dtype) ? hvds__dtype_name(dtype) : "unknown");
  if (index_dtype != HVDS_INT32 && index_dtype != HVDS_INT64)
    return hvds__set_error(HVDS_INVALID_ARGUMENT, "%s: index dtype must be INT32 or INT64", fn);
  if (n < 0 || (index_dtype == HVDS_INT32 && n > INT32_MAX))
    return hvds__set_error(HVDS_INVALID_ARGUMENT, "%s: %lld elements do not fit %s indices", fn,
                           (long long)n, n < 0 ? "any" : "INT32");
  if (k < 0)
    return hvds__set_error(HVDS_INVALID_ARGUMENT, "%s: k = %lld is negative", fn, (long long)k);
  if (n > 0 && (!acc || (k > 0 && (!indices || !values))))
    return hvds__set_error(HVDS_INVALID_ARGUMENT, "%s: %s is NULL", fn,
                           !acc       ? "acc"
                           : !indices ? "indices"
                                      : "values");
  return HVDS_SUCCESS;
}

hvds_result_t hvds_topk_feedback(void* acc, const void* grad, hvds_dtype_t dtype, int64_t n,
                                 const hvds_topk_plan_t* plan, void* indices,
                                 hvds_dtype_t index_dtype, void* values, int64_t* count,
                                 int32_t* exact) {
  if (!count || !plan)
    return hvds__set_error(HVDS_INVALID_ARGUMENT, "hvds_topk_feedback: %s is NULL",
                           plan ? "count" : "plan");
  *count = 0;
  hvds_result_t rc =
      check_topk("hvds_topk_feedback", acc, dtype, n, plan->k, indices, index_dtype, values);
  if (rc != HVDS_SUCCESS) return rc;
  if (plan->sample < 0 || (plan->sample > 0 && (plan->sample_rank < 1 ||
                                                plan->sample_rank > plan->sample)))
    return hvds__set_error(HVDS_INVALID_ARGUMENT,
                           "hvds_topk_feedback: sample_rank %lld outside [1, sample = %lld]",
                           (long long)plan->sample_rank, (long long)plan->sample);
  return hvds__topk_feedback(acc, grad, dtype, n, plan, indices, index_dtype, values, count,
                             exact);
}

hvds_result_t hvds_topk_feedback_device(int32_t device, int64_t stream, void* acc, const void* grad,
                                        hvds_dtype_t dtype, int64_t n, int64_t k, void* indices,
                                        hvds_dtype_t index_dtype, void* values) {
  static const char fn[] = "hvds_topk_feedback_device";
  hvds_result_t rc = check_topk(fn, acc, dtype, n, k, indices, index_dtype, values);
  if (rc != HVDS_SUCCESS) return rc;
  if (device < 0)
    return hvds__set_error(HVDS_INVALID_ARGUMENT, "%s: device %d is not a GPU", fn, (int)device);
  char why[512] = "";
  const hvds_device_api_t* api = hvds__device_library(why, sizeof(why), NULL, 0);
  if (api == NULL) return hvds__set_error(HVDS_NOT_SUPPORTED, "%s: no device library: %s", fn, why);
  if (k > n) k = n;
  if (api->topk_feedback(device, stream, acc, grad, dtype, (size_t)n, (size_t)k, indices,
                         index_dtype, values, why, sizeof(why)) != 0)
    return hvds__set_error(HVDS_SYSTEM_ERROR, "%s on GPU %d: %s", fn, (int)device, why);
  return HVDS_SUCCESS;
}
