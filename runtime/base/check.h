/* The five check macros. Each turns a failure into an hvds_result_t and leaves a file:line
 * breadcrumb in the debug log, so a failure deep in a call chain reads like a stack trace. */
#ifndef HVDS_CHECK_H_
#define HVDS_CHECK_H_

#include <errno.h>
#include <string.h>

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

/* A system call returning -1 with errno: retried on EINTR/EAGAIN, else HVDS_SYSTEM_ERROR. */
#define HVDS_SYS_CHECK(call, what)                                   \
  do {                                                               \
    int hvds_sys_rc_;                                                \
    do {                                                             \
      hvds_sys_rc_ = (int)(call);                                    \
    } while (hvds_sys_rc_ == -1 && (errno == EINTR || errno == EAGAIN)); \
    if (hvds_sys_rc_ == -1) {                                        \
      HVDS_WARN("%s failed: %s", (what), strerror(errno));           \
      return HVDS_SYSTEM_ERROR;                                      \
    }                                                                \
  } while (0)

/* pthread calls return the error instead of setting errno. */
#define HVDS_PTHREAD_CHECK(call, what)                               \
  do {                                                               \
    int hvds_pt_rc_ = (call);                                        \
    if (hvds_pt_rc_ != 0) {                                          \
      HVDS_WARN("%s failed: %s", (what), strerror(hvds_pt_rc_));     \
      return HVDS_SYSTEM_ERROR;                                      \
    }                                                                \
  } while (0)

/* CUDA calls; defined in cuda/ builds only (clears the sticky error there). */
#ifndef HVDS_CUDA_CHECK
#define HVDS_CUDA_CHECK(call) HVDS_CHECK(call)
#endif

#endif /* HVDS_CHECK_H_ */
