/* The coordinator's wake-ups, for the multi-process worker (worker_wake.c). */
#ifndef HVDS_TEST_WORKER_WAKE_H_
#define HVDS_TEST_WORKER_WAKE_H_

/* Exits non-zero with a reason on any wrong result, error or operation that never ends. */
void scenario_wake(int rank, int size);

#endif
