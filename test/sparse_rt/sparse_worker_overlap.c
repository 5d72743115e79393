/* Sparse allreduce test worker, the overlap learned from earlier steps: the second step of a
 * name gives the cost model the overlap that its first step's union showed (1 for identical
 * supports, 0 for disjoint ones), on every rank alike; also when rank 0 has joined (it takes part
 * with no entries and must learn like the others, its value being the one every rank uses) and
 * for dense tensors under sparse_detect. Each rank prints one OVERLAP line per step with the
 * overlap used, the one learned and the pick; the test compares the lines across ranks. */
#include <string.h>

#include "sparse_rt.h"
#include "sparse_worker.h"

#define DIM 65536

static const layout_t kCoo = {HVDS_SPARSE_COO, HVDS_INT32, HVDS_FLOAT32, 1, {DIM}};

/* Rank r's k entries: the same indices on every rank (same), or rank r's own (i * P + r,
 * disjoint); values 1 + (i + r) % 4. */
static void make(int same, int64_t k, int r, int P, entries_t* e) {
  e->nnz = k;
  e->indices = malloc((size_t)k * sizeof(int32_t) + 1);
  e->values = malloc((size_t)k * sizeof(float) + 1);
  for (int64_t i = 0; i < k; i++) {
    ((int32_t*)e->indices)[i] = (int32_t)(same ? (i * 3) % DIM : i * P + r);
    ((float*)e->values)[i] = (float)(1 + (i + r) % 4);
  }
}

/* The pick must be the least corrected prediction (ties to the lower id), the corrections being
 * rank 0's: printed (as their bits) for the test to compare across ranks. */
static void print_step(const char* name, int step, const hvds_sparse_stats_t* st) {
  char used[16] = "uniform", learned[16] = "none";
  if (st->overlap >= 0) snprintf(used, sizeof used, "%.3f", st->overlap);
  if (st->learned >= 0) snprintf(learned, sizeof learned, "%.3f", st->learned);
  int best = 0;
  double best_cost = 0;
  for (int a = 1; a < 7; a++) { // dense .. zen (cost_model.h)
    double c = st->costs[a] * (st->calib[a] > 0 ? st->calib[a] : 1.0);
    if (best == 0 || c < best_cost) best = a, best_cost = c;
  }
  if (size_ > 1 && best != st->auto_pick)
    FAIL("%s step %d: picked %s, but the least corrected prediction is algorithm %d", name, step,
         st->auto_name, best);
  printf("OVERLAP %s step %d: used %s learned %s pick %s ran %s corrections", name, step, used,
         learned, st->auto_name, st->algorithm_name);
  for (int a = 1; a < 7; a++) printf(" %a", st->calib[a]);
  printf("\n");
}

/* One auto step of name over the ranks from `first` on (the ranks below have joined), each with
 * k entries; checks the result against the sum of theirs. */
static hvds_sparse_stats_t sparse_step(const char* name, int step, int same, int64_t k, int first) {
  int P = size_ - first;
  double* want = calloc(DIM, sizeof(double));
  unsigned char* hit = calloc(DIM, 1);
  entries_t e = {0};
  for (int r = first; r < size_; r++) {
    make(same, k, r - first, P, &e);
    for (int64_t i = 0; i < k; i++) {
      int32_t x = ((int32_t*)e.indices)[i];
      want[x] += ((float*)e.values)[i];
      hit[x] = 1;
    }
    free_entries(&e);
  }
  make(same, k, rank_ - first, P, &e);
  hvds_sparse_tensor_t t = sparse_view(&kCoo, &e);
  hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
  o.name = name;
  hvds_handle_t h;
  CHECK_OK(hvds_sparse_allreduce_async(&t, NULL, &o, &h));
  wait_ok(h, name);
  check_result(&kCoo, h, NULL, want, hit, name);
  hvds_sparse_stats_t st;
  CHECK_OK(hvds__handle_sparse_stats(h, &st));
  if (st.algorithm != st.auto_pick)
    FAIL("%s: ran %s, the pick is %s", name, st.algorithm_name, st.auto_name);
  print_step(name, step, &st);
  hvds_release(h);
  free_entries(&e);
  free(want);
  free(hit);
  return st;
}

/* One step of a dense tensor under sparse_detect: every fifth element non-zero on every rank. */
static hvds_sparse_stats_t detect_step(const char* name, int step) {
  float* x = calloc(DIM, sizeof(float));
  for (int64_t i = 0; i < DIM; i += 5) x[i] = (float)(1 + rank_);
  hvds_tensor_t t = {x, HVDS_FLOAT32, -1, 1, {DIM}};
  hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
  o.name = name;
  o.sparse_detect = 1;
  hvds_handle_t h;
  CHECK_OK(hvds_allreduce_async(&t, &t, &o, &h));
  wait_ok(h, name);
  for (int64_t i = 0; i < DIM; i++)
    check_close(x[i], i % 5 ? 0 : size_ * (size_ + 1) / 2.0, HVDS_FLOAT32, name, (size_t)i);
  hvds_sparse_stats_t st;
  CHECK_OK(hvds__handle_sparse_stats(h, &st));
  print_step(name, step, &st);
  hvds_release(h);
  free(x);
  return st;
}

/* After steps 1 and 2 of a name: the selector of step 3 knows how an algorithm did that ran in
 * both (a correction from the second run: the first is a warm-up), and only then. */
static void expect_correction(const char* name, const hvds_sparse_stats_t* s) {
  for (int a = 0; a < 7; a++)
    if (s[0].calib[a] != 0 || s[1].calib[a] != 0)
      FAIL("%s: a correction for algorithm %d before any algorithm ran twice", name, a);
  int a = s[0].algorithm;
  if (s[1].algorithm == a && s[1].costs[a] > 0 && !(s[2].calib[a] > 0))
    FAIL("%s: step 3 has no correction for %s, which ran in steps 1 and 2", name,
         s[0].algorithm_name);
}

/* What step 2 must have used, and step 1 learned: w, or nothing on one rank. */
static void expect(const char* name, const hvds_sparse_stats_t* s1, const hvds_sparse_stats_t* s2,
                   double w, int P) {
  double want = P > 1 ? w : -1;
  if (s1->overlap != -1) FAIL("%s: step 1 used overlap %g, not uniform", name, s1->overlap);
  if (s1->learned != want || s2->overlap != want)
    FAIL("%s: step 1 learned %g, step 2 used %g; expected %g", name, s1->learned, s2->overlap,
         want);
}

void scenario_overlap(void) {
  const int64_t k = DIM * 3 / 10, kd = DIM / 10;
  hvds_sparse_stats_t same[3], disjoint[3];
  for (int s = 0; s < 3; s++) {  // two names side by side: one learns 1, the other 0
    same[s] = sparse_step("ovl.same", s + 1, 1, k, 0);
    disjoint[s] = sparse_step("ovl.disjoint", s + 1, 0, kd, 0);
  }
  expect("ovl.same", &same[0], &same[1], 1.0, size_);
  expect("ovl.disjoint", &disjoint[0], &disjoint[1], 0.0, size_);
  expect_correction("ovl.same", same);
  expect_correction("ovl.disjoint", disjoint);
  hvds_sparse_stats_t d1 = detect_step("ovl.detect", 1), d2 = detect_step("ovl.detect", 2);
  expect("ovl.detect", &d1, &d2, 1.0, size_);
  if (size_ < 2) return;
  // Rank 0 joins: the others' second step uses the overlap rank 0 learned without entries.
  if (rank_ != 0) {
    hvds_sparse_stats_t j1 = sparse_step("ovl.join", 1, 1, k, 1);
    hvds_sparse_stats_t j2 = sparse_step("ovl.join", 2, 1, k, 1);
    expect("ovl.join", &j1, &j2, 1.0, size_);
  }
  hvds_handle_t h;
  CHECK_OK(hvds_join_async(&h));
  wait_ok(h, "join");
  hvds_release(h);
}
