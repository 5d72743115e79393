/* Deadlock detection, for the multi-process worker (worker_deadlock.c). */
#ifndef HVDS_TEST_WORKER_DEADLOCK_H_
#define HVDS_TEST_WORKER_DEADLOCK_H_

/* Run with HVDSPARSE_DEADLOCK_SHUTDOWN_SECONDS=3 and np >= 3. Exits non-zero with a reason when
 * a slow rank is taken for a deadlock or a real deadlock hangs or fails without naming who is
 * missing what. */
void scenario_deadlock(int rank, int size);

#endif
