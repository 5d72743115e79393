/* One cycle (negotiate every set, execute the responses) and which thread runs it: the
 * coordinator, or a caller blocked in hvds_wait() while the coordinator is idle. */
#ifndef HVDS_CYCLE_H_
#define HVDS_CYCLE_H_

#include "state.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { HVDS_CYCLE_COORDINATOR, HVDS_CYCLE_CALLER } hvds_cycle_runner_t;

/* Takes the cycle when it is free and due (callers only when caller runs are enabled and no
 * stop was asked). Returns 1 if taken. *next: when the next cycle is due (a time to sleep
 * until when not taken). *result: the loop's sticky end (1 stop, -1 failure), or 0. */
int hvds__cycle_acquire(hvds_cycle_runner_t who, double* next, int* result);
/* Gives the cycle back, recording result when it ends the loop and waking the coordinator if
 * it must look (new work, or the end). due_now makes the next cycle due at once. Returns when
 * the next cycle is due. */
double hvds__cycle_release(int result, int due_now);
/* The coordinator's loop has ended with result: no thread takes the cycle again. */
void hvds__cycle_end(int result);
/* Runs one cycle as its owner: first what a caller left of the previous one, if anything.
 * Returns 0 to go on, 1 when every rank agreed to stop, -1 when communication failed (the fault
 * is recorded). */
int hvds__cycle_run(void);
/* After hvds__cycle_run: whether the next cycle is due at once (this rank still waits for its
 * peers to agree on entries it submitted), to pass to hvds__cycle_release. */
int hvds__cycle_due_again(void);
/* For a thread blocked in hvds_wait() on awaited: runs the next cycle if it is due and free.
 * Once awaited is complete it leaves the rest of the cycle's operations to the coordinator (in
 * the same order, before anything else), so that a caller waiting for the first of several
 * pipelined operations gets back to its work while the others run. Returns 1 if it ran one. */
int hvds__cycle_run_as_caller(hvds_handle_t awaited);
/* Frees what a caller left of a cycle (at the end of the loop). */
void hvds__cycle_drop_rest(void);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_CYCLE_H_ */
