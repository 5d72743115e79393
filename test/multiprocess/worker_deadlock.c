/* A slow rank is not a deadlock: rank 0 computes (sleeps) for twice the deadlock time while the
 * others wait, and the allreduce then succeeds. A deadlock is: rank 0 waits in a barrier while
 * the others wait in an allreduce it never submits (a cached one, so that the fast path has to
 * hand it to rank 0's table first). Every rank gets an error naming the missing ranks and
 * tensors, instead of hanging. Waits come in 1 s slices, as the Python bindings wait. */
#include "worker_deadlock.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/worker_check.h"
#include "../common/worker_tensors.h"
#include "hvdsparse.h"

static int rank_; /* for FAIL */

static double seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Waits in 1 s slices for at most limit_s; returns the status and leaves the handle. */
static hvds_result_t wait_sliced(hvds_handle_t h, double limit_s) {
  double t0 = seconds();
  hvds_result_t rc;
  while ((rc = hvds_wait(h, 1000)) == HVDS_TIMEOUT && hvds_poll(h) == 0)
    if (seconds() - t0 > limit_s) FAIL("rank %d: still waiting after %.0f s", rank_, limit_s);
  return rc;
}

static hvds_handle_t start_allreduce(float* v, const char* name) {
  hvds_tensor_t t = tensor1(v, HVDS_FLOAT32, 1);
  hvds_op_options_t o = named(name);
  hvds_handle_t h;
  CHECK_OK(hvds_allreduce_async(&t, &t, &o, &h));
  return h;
}

static void expect_deadlock_error(hvds_handle_t h, hvds_result_t rc, const char* what) {
  const char* msg = hvds_handle_error(h);
  if (rc != HVDS_PRECONDITION_ERROR || strstr(msg, "Deadlock") == NULL)
    FAIL("rank %d: %s ended with %s: %s", rank_, what, hvds_result_str(rc), msg);
  /* Rank 0 is missing from the allreduce, the others from the barrier. */
  if (strstr(msg, "0: [warm]") == NULL || strstr(msg, "1: [") == NULL)
    FAIL("rank %d: the error does not name who is missing what: %s", rank_, msg);
}

void scenario_deadlock(int rank, int size) {
  rank_ = rank;
  if (size < 3) FAIL("deadlock needs np >= 3");
  float v = 1;
  hvds_handle_t h = start_allreduce(&v, "warm");  // cached from here on
  if (wait_sliced(h, 30) != HVDS_SUCCESS) FAIL("warm: %s", hvds_handle_error(h));
  hvds_release(h);

  if (rank == 0) sleep(6);  // computing, not waiting: the others' wait is no deadlock
  v = 1;
  h = start_allreduce(&v, "warm");
  hvds_result_t rc = wait_sliced(h, 30);
  if (rc != HVDS_SUCCESS || v != (float)size)
    FAIL("rank %d: allreduce after a slow rank: %s %s (%g)", rank, hvds_result_str(rc),
         hvds_handle_error(h), v);
  hvds_release(h);

  double t0 = seconds();
  if (rank == 0) {
    CHECK_OK(hvds_barrier_async(0, &h));
  } else {
    v = 1;
    h = start_allreduce(&v, "warm");
  }
  rc = wait_sliced(h, 40);
  expect_deadlock_error(h, rc, rank == 0 ? "barrier" : "allreduce");
  hvds_release(h);
  printf("rank %d: deadlock ended after %.1f s\n", rank, seconds() - t0);
}
