/* Failure reporting for the multi-process test workers: FAIL prints the rank, the place and the
 * reason and exits non-zero; CHECK_OK fails on any error of a runtime call. The including file
 * defines `rank_` (this process's rank). */
#ifndef HVDS_TEST_WORKER_CHECK_H_
#define HVDS_TEST_WORKER_CHECK_H_

#include <stdio.h>
#include <stdlib.h>

#include "hvdsparse.h"

#define FAIL(...)                                                       \
  do {                                                                  \
    fprintf(stderr, "rank %d FAIL %s:%d: ", rank_, __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__);                                       \
    fprintf(stderr, "\n");                                              \
    exit(1);                                                            \
  } while (0)
#define CHECK_OK(call)                                                                             \
  do {                                                                                             \
    hvds_result_t rc_ = (call);                                                                    \
    if (rc_ != HVDS_SUCCESS) FAIL("%s -> %s: %s", #call, hvds_result_str(rc_), hvds_last_error()); \
  } while (0)

#endif /* HVDS_TEST_WORKER_CHECK_H_ */
