/* The ordered fast lane across processes: more ordered operations queued than one cycle runs,
 * mixed with negotiated ones, give the right results in order; a different order on one rank
 * fails on every rank with a message naming that rank's operation, and the lane works again
 * afterwards; a collective the lane does not take is refused at the call. */
#include "worker_lane.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hvdsparse.h"
#include "../common/worker_check.h"

static int rank_, size_;

#define OPS 20 /* more than one cycle's lane takes (HVDS_LANE_MAX) */

static hvds_op_options_t ordered(const char* name) {
  hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
  o.name = name;
  o.ordered = 1;
  return o;
}

static void wait_ok(hvds_handle_t h, const char* what) {
  hvds_result_t rc = hvds_wait(h, 60000);
  if (rc != HVDS_SUCCESS) FAIL("%s: %s: %s", what, hvds_result_str(rc), hvds_handle_error(h));
}

static void expect_close(float got, double want, const char* what, int i) {
  if (fabs(got - want) > 1e-5 * fabs(want) + 1e-6) FAIL("%s: element %d is %g, expected %g", what, i, got, want);
}

/* Reduce-scatters of OPS buckets (a negotiated allreduce in the middle), then all-gathers of
 * the shards, all queued before the first wait. */
static void pipeline(void) {
  float* bucket[OPS];
  hvds_handle_t rs[OPS], ag[OPS], plain;
  char names[OPS][32];
  float side[4] = {1, 2, 3, 4};
  for (int b = 0; b < OPS; b++) {
    int rows = size_ * (b + 1);
    bucket[b] = malloc((size_t)rows * sizeof(float));
    for (int i = 0; i < rows; i++) bucket[b][i] = (float)(i + rank_ + b);
    hvds_tensor_t t = {bucket[b], HVDS_FLOAT32, -1, 1, {rows}};
    snprintf(names[b], sizeof names[b], "lane.rs.%d", b);
    hvds_op_options_t o = ordered(names[b]);
    if (hvds_reducescatter_async(&t, &o, &rs[b]) != HVDS_SUCCESS) FAIL("rs %d: %s", b, hvds_last_error());
    if (b == OPS / 2) {
      hvds_tensor_t s = {side, HVDS_FLOAT32, -1, 1, {4}};
      hvds_op_options_t p = HVDS_OP_OPTIONS_INIT;
      p.name = "lane.negotiated";
      if (hvds_allreduce_async(&s, &s, &p, &plain) != HVDS_SUCCESS) FAIL("plain: %s", hvds_last_error());
    }
  }
  for (int b = 0; b < OPS; b++) {
    wait_ok(rs[b], names[b]);
    hvds_tensor_t shard;
    if (hvds_handle_output(rs[b], 0, &shard) != HVDS_SUCCESS || shard.shape[0] != b + 1)
      FAIL("%s: shard of %lld rows, expected %d", names[b], (long long)shard.shape[0], b + 1);
    for (int i = 0; i <= b; i++) {
      int at = rank_ * (b + 1) + i; /* sum over ranks r of (at + r + b) */
      expect_close(((float*)shard.data)[i], (double)size_ * (at + b) + size_ * (size_ - 1) / 2.0, names[b], i);
    }
    snprintf(names[b], sizeof names[b], "lane.ag.%d", b);
    hvds_op_options_t o = ordered(names[b]);
    if (hvds_allgather_async(&shard, &o, &ag[b]) != HVDS_SUCCESS) FAIL("ag %d: %s", b, hvds_last_error());
  }
  for (int b = 0; b < OPS; b++) {
    wait_ok(ag[b], names[b]);
    hvds_tensor_t all;
    if (hvds_handle_output(ag[b], 0, &all) != HVDS_SUCCESS || all.shape[0] != size_ * (b + 1))
      FAIL("%s: %lld rows, expected %d", names[b], (long long)all.shape[0], size_ * (b + 1));
    for (int i = 0; i < size_ * (b + 1); i++)
      expect_close(((float*)all.data)[i], (double)size_ * (i + b) + size_ * (size_ - 1) / 2.0, names[b], i);
    hvds_release(ag[b]);
    hvds_release(rs[b]); /* its output was the all-gather's input */
    free(bucket[b]);
  }
  wait_ok(plain, "lane.negotiated");
  for (int i = 0; i < 4; i++) expect_close(side[i], (double)size_ * (i + 1), "lane.negotiated", i);
  hvds_release(plain);
}

/* Rank 0 submits a then b, the others b then a: both positions fail everywhere, each naming this
 * rank's own operation there, however the submissions fall into cycles; then the lane runs
 * again. */
static void mismatch(void) {
  float a[3] = {1, 1, 1}, b[5] = {1, 1, 1, 1, 1};
  hvds_tensor_t ta = {a, HVDS_FLOAT32, -1, 1, {3}}, tb = {b, HVDS_FLOAT32, -1, 1, {5}};
  hvds_op_options_t oa = ordered("lane.a"), ob = ordered("lane.b");
  hvds_handle_t h[2];
  int first_a = rank_ == 0;
  if (hvds_allreduce_async(first_a ? &ta : &tb, first_a ? &ta : &tb, first_a ? &oa : &ob, &h[0]) != HVDS_SUCCESS)
    FAIL("enqueue: %s", hvds_last_error());
  if (first_a) usleep(20000);  // cycles run while rank 0 has only its first one queued
  if (hvds_allreduce_async(first_a ? &tb : &ta, first_a ? &tb : &ta, first_a ? &ob : &oa, &h[1]) != HVDS_SUCCESS)
    FAIL("enqueue: %s", hvds_last_error());
  for (int k = 0; k < 2; k++) {
    hvds_result_t rc = hvds_wait(h[k], 60000);
    const char* msg = hvds_handle_error(h[k]);
    if (rc != HVDS_PRECONDITION_ERROR || strstr(msg, "Mismatched ordered operations") == NULL)
      FAIL("mismatch %d: %s: %s", k, hvds_result_str(rc), msg);
    char mine[64];
    snprintf(mine, sizeof mine, "rank %d submitted ALLREDUCE '%s'", rank_,
             (k == 0) == first_a ? "lane.a" : "lane.b");
    if (strstr(msg, mine) == NULL) FAIL("mismatch message lacks \"%s\": %s", mine, msg);
    if (k == 0) printf("rank %d got: %s\n", rank_, msg);
    hvds_release(h[k]);
  }
  hvds_tensor_t tc = {a, HVDS_FLOAT32, -1, 1, {3}};
  hvds_op_options_t oc = ordered("lane.after");
  hvds_handle_t hc;
  if (hvds_allreduce_async(&tc, &tc, &oc, &hc) != HVDS_SUCCESS) FAIL("after: %s", hvds_last_error());
  wait_ok(hc, "lane.after");
  for (int i = 0; i < 3; i++) expect_close(a[i], size_, "lane.after", i);
  hvds_release(hc);
}

void scenario_lane(int rank, int size) {
  rank_ = rank;
  size_ = size;
  // First, while every rank is surely up: a rank that finishes early shuts the job down.
  float x = 1;
  hvds_tensor_t t = {&x, HVDS_FLOAT32, -1, 1, {1}};
  hvds_op_options_t o = ordered("lane.broadcast");
  hvds_handle_t h;
  if (hvds_broadcast_async(&t, &o, &h) != HVDS_INVALID_ARGUMENT ||
      strstr(hvds_last_error(), "the ordered lane takes allreduce, reducescatter and allgather") == NULL)
    FAIL("an ordered broadcast was not refused: %s", hvds_last_error());
  pipeline();
  if (size_ >= 2) mismatch();
}
