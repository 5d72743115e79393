/* The check macros. Each passes a failure on as an hvds_result_t and leaves a file:line
 * breadcrumb in the debug log, so a failure deep in a call chain reads like a stack trace.
 * Code that calls the CUDA runtime has HVDS_CUDA_CHECK too (cuda/cuda_check.h). */
#ifndef HVDS_CHECK_H_
#define HVDS_CHECK_H_

#include "hvdsparse.h"
#include "log.h"

/* Returns the failure to the caller. */
#define HVDS_CHECK(call)                            \
  do {                                              \
    hvds_result_t hvds_rc_ = (call);                \
    if (hvds_rc_ != HVDS_SUCCESS) {                 \
      HVDS_DEBUG("-> %d", (int)hvds_rc_);           \
      return hvds_rc_;                              \
    }                                               \
  } while (0)

/* Stores the failure in rc and jumps to the cleanup label. */
#define HVDS_CHECK_GOTO(call, rc, label)            \
  do {                                              \
    (rc) = (call);                                  \
    if ((rc) != HVDS_SUCCESS) {                     \
      HVDS_DEBUG("-> %d", (int)(rc));               \
      goto label;                                   \
    }                                               \
  } while (0)

#endif /* HVDS_CHECK_H_ */
