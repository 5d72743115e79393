/* The ordered fast lane's scenario for the multi-process worker (worker_lane.c). */
#ifndef HVDS_TEST_WORKER_LANE_H_
#define HVDS_TEST_WORKER_LANE_H_

/* Exits non-zero with a reason on any wrong result or error. */
void scenario_lane(int rank, int size);

#endif
