/* When exited workers (zombies not yet reaped) died, on one clock, to name the first failure. */
#ifndef HVDS_LAUNCHER_EXIT_CLOCK_H_
#define HVDS_LAUNCHER_EXIT_CLOCK_H_

#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* For each of the n zombies pids[i], the CLOCK_MONOTONIC time of its exit in ms into
 * exit_ms[i], or -1 where the kernel does not say (no /proc/<pid>/sched, or the CPU it died on
 * is not one this process may run on). Briefly moves the calling thread onto each of those
 * CPUs; its affinity is restored. */
void hvds__exit_times_ms(const pid_t* pids, int n, double* exit_ms);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_LAUNCHER_EXIT_CLOCK_H_ */
