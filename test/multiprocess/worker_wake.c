/* A thread that waited and ran its operation itself does not wake the coordinator for its next
 * one (it will most likely wait again). These are the cases where it does not: the operation
 * must still finish without a wait, through the coordinator's own deadline, whether the
 * coordinator sleeps with a deadline, without one (one rank), or on the doorbell (every rank
 * idle for a while). */
#include "worker_wake.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "hvdsparse.h"
#include "../common/worker_check.h"

static int rank_; /* for FAIL */

static double seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Allreduce of one float named name: rank r gives r + 1. With poll, the handle is polled (no
 * hvds_wait) until done or 20 s pass; else waited on. Returns the seconds it took. */
static double allreduce_one(const char* name, int rank, int size, int poll) {
  float v = (float)(rank + 1);
  hvds_tensor_t t = {&v, HVDS_FLOAT32, -1, 1, {1}};
  hvds_op_options_t opt = HVDS_OP_OPTIONS_INIT;
  opt.name = name;
  hvds_handle_t h;
  double t0 = seconds();
  CHECK_OK(hvds_allreduce_async(&t, &t, &opt, &h));
  if (poll) {
    while (hvds_poll(h) == 0) {
      if (seconds() - t0 > 20) FAIL("rank %d: %s not done 20 s after it was queued", rank, name);
      usleep(100);
    }
  }
  hvds_result_t rc = hvds_wait(h, 60000);
  if (rc != HVDS_SUCCESS) FAIL("%s: %s: %s", name, hvds_result_str(rc), hvds_handle_error(h));
  float want = (float)size * (float)(size + 1) / 2;
  if (v != want) FAIL("rank %d: %s gave %g, want %g", rank, name, v, want);
  hvds_release(h);
  return seconds() - t0;
}

void scenario_wake(int rank, int size) {
  rank_ = rank;
  char name[64];
  for (int round = 0; round < 3; round++) {
    /* Waited on: the waiting thread runs the cycles itself. */
    for (int i = 0; i < 50; i++) {
      snprintf(name, sizeof(name), "wake.wait.%d.%d", round, i);
      allreduce_one(name, rank, size, 0);
    }
    /* The next one is only polled: the coordinator must run it. */
    snprintf(name, sizeof(name), "wake.poll.%d", round);
    double took = allreduce_one(name, rank, size, 1);
    printf("rank %d: polled allreduce after waited ones took %.1f ms\n", rank, took * 1e3);
    /* Idle long enough for every coordinator to sleep on the doorbell (20 idle cycles of 1 ms
     * by default), then again a waited one and a polled one. */
    usleep(300 * 1000);
    snprintf(name, sizeof(name), "wake.idle_wait.%d", round);
    allreduce_one(name, rank, size, 0);
    usleep(300 * 1000);
    snprintf(name, sizeof(name), "wake.idle_poll.%d", round);
    allreduce_one(name, rank, size, 1);
  }
}
