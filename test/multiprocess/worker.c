/* A worker for the multi-process tests: run under `hvdsparse run -np N worker SCENARIO`. Each
 * scenario checks results against values every rank can compute on its own, prints
 * "PASS <scenario>" on success and exits non-zero with a reason otherwise. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/worker_check.h"
#include "../common/worker_tensors.h"
#include "hvdsparse.h"
#include "worker_deadlock.h"
#include "worker_lane.h"
#include "worker_wake.h"

static int rank_, size_;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void wait_ok(hvds_handle_t h, const char* what) {
  hvds_result_t rc = hvds_wait(h, 60000);
  if (rc != HVDS_SUCCESS) FAIL("%s: %s: %s", what, hvds_result_str(rc), hvds_handle_error(h));
}

/* ---- typed element access so one check covers every dtype ---- */
static double get_el(const void* p, hvds_dtype_t dt, size_t i) {
  switch (dt) {
    case HVDS_UINT8: return ((const uint8_t*)p)[i];
    case HVDS_INT8: return ((const int8_t*)p)[i];
    case HVDS_UINT16: return ((const uint16_t*)p)[i];
    case HVDS_INT16: return ((const int16_t*)p)[i];
    case HVDS_INT32: return ((const int32_t*)p)[i];
    case HVDS_INT64: return (double)((const int64_t*)p)[i];
    case HVDS_FLOAT32: return ((const float*)p)[i];
    case HVDS_FLOAT64: return ((const double*)p)[i];
    case HVDS_BOOL: return ((const uint8_t*)p)[i];
    case HVDS_FLOAT16: { /* small integers only: exact */
      uint16_t h = ((const uint16_t*)p)[i];
      int e = (h >> 10) & 31, m = h & 1023;
      double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
      return (h & 0x8000) ? -v : v;
    }
    case HVDS_BFLOAT16: {
      uint32_t bits = (uint32_t)((const uint16_t*)p)[i] << 16;
      float f;
      memcpy(&f, &bits, 4);
      return f;
    }
    default: return NAN;
  }
}

static void set_el(void* p, hvds_dtype_t dt, size_t i, double v) {
  switch (dt) {
    case HVDS_UINT8: ((uint8_t*)p)[i] = (uint8_t)v; break;
    case HVDS_INT8: ((int8_t*)p)[i] = (int8_t)v; break;
    case HVDS_UINT16: ((uint16_t*)p)[i] = (uint16_t)v; break;
    case HVDS_INT16: ((int16_t*)p)[i] = (int16_t)v; break;
    case HVDS_INT32: ((int32_t*)p)[i] = (int32_t)v; break;
    case HVDS_INT64: ((int64_t*)p)[i] = (int64_t)v; break;
    case HVDS_FLOAT32: ((float*)p)[i] = (float)v; break;
    case HVDS_FLOAT64: ((double*)p)[i] = v; break;
    case HVDS_BOOL: ((uint8_t*)p)[i] = v != 0; break;
    case HVDS_FLOAT16: { /* exact for small non-negative integers */
      uint16_t h = 0;
      if (v != 0) {
        int e;
        double m = frexp(fabs(v), &e); /* v = m * 2^e, m in [0.5,1) */
        h = (uint16_t)(((e + 14) << 10) | ((int)(m * 2048) & 1023));
        if (v < 0) h |= 0x8000;
      }
      ((uint16_t*)p)[i] = h;
      break;
    }
    case HVDS_BFLOAT16: {
      float f = (float)v;
      uint32_t bits;
      memcpy(&bits, &f, 4);
      ((uint16_t*)p)[i] = (uint16_t)(bits >> 16);
      break;
    }
    default: break;
  }
}

/* Rank r's element i: small non-negative integers so every dtype and op is exact. */
static double value(int r, size_t i) { return (double)((r + 1 + i) % 3 + (r == 0 ? 1 : 0)); }

static double expected(hvds_reduce_op_t op, hvds_dtype_t dt, size_t i) {
  double acc = value(0, i);
  for (int r = 1; r < size_; r++) {
    double v = value(r, i);
    if (op == HVDS_SUM || op == HVDS_AVERAGE) acc += v;
    if (op == HVDS_MIN) acc = v < acc ? v : acc;
    if (op == HVDS_MAX) acc = v > acc ? v : acc;
    if (op == HVDS_PRODUCT) acc *= v;
  }
  if (dt == HVDS_BOOL) {
    if (op == HVDS_SUM || op == HVDS_MAX) return acc != 0; /* or */
    int all = 1;
    for (int r = 0; r < size_; r++) all &= value(r, i) != 0;
    return all;
  }
  if (op == HVDS_AVERAGE) {
    double avg = acc / size_;
    int is_int = dt != HVDS_FLOAT16 && dt != HVDS_FLOAT32 && dt != HVDS_FLOAT64 && dt != HVDS_BFLOAT16;
    return is_int ? trunc(avg) : avg;
  }
  return acc;
}

static void check_close(double got, double want, hvds_dtype_t dt, const char* what, size_t i) {
  double tol = (dt == HVDS_FLOAT16 || dt == HVDS_BFLOAT16) ? 0.02 * fabs(want) + 0.01 : 1e-6 * fabs(want) + 1e-9;
  if (fabs(got - want) > tol) FAIL("%s: element %zu is %g, expected %g", what, i, got, want);
}

/* Every dtype x op, fused (all enqueued before any wait) and one by one. */
static void scenario_allreduce(void) {
  const hvds_reduce_op_t ops[] = {HVDS_SUM, HVDS_AVERAGE, HVDS_MIN, HVDS_MAX, HVDS_PRODUCT};
  const size_t counts[] = {0, 1, 17, 1001, 65536};
  for (int fused = 0; fused <= 1; fused++) {
    enum { MAXT = 11 * 5 * 5 };
    hvds_handle_t hs[MAXT];
    void* bufs[MAXT];
    int meta[MAXT][3];
    int nt = 0;
    for (int dt = 0; dt < HVDS_DTYPE_COUNT; dt++)
      for (int o = 0; o < 5; o++)
        for (int c = 0; c < 5; c++) {
          if (dt == HVDS_BOOL && ops[o] == HVDS_AVERAGE) continue;
          if ((dt == HVDS_UINT8 || dt == HVDS_INT8 || dt == HVDS_FLOAT16 || dt == HVDS_BFLOAT16) &&
              ops[o] == HVDS_PRODUCT && size_ > 3) continue; /* overflow / inexact */
          size_t n = counts[c];
          size_t esz = hvds_dtype_size(dt);
          void* buf = malloc(n * esz + 1);
          for (size_t i = 0; i < n; i++) set_el(buf, dt, i, value(rank_, i));
          hvds_tensor_t t = tensor1(buf, dt, (int64_t)n);
          char name[96];
          snprintf(name, sizeof(name), "ar.%d.%d.%d.%d", fused, dt, o, c);
          hvds_op_options_t opt = HVDS_OP_OPTIONS_INIT;
          opt.name = name;
          opt.op = ops[o];
          CHECK_OK(hvds_allreduce_async(&t, &t, &opt, &hs[nt]));
          bufs[nt] = buf;
          meta[nt][0] = dt; meta[nt][1] = o; meta[nt][2] = c;
          nt++;
          if (!fused) {
            wait_ok(hs[nt - 1], name);
          }
        }
    for (int k = 0; k < nt; k++) {
      wait_ok(hs[k], "allreduce");
      hvds_release(hs[k]);
      hvds_dtype_t dt = meta[k][0];
      size_t n = counts[meta[k][2]];
      for (size_t i = 0; i < n; i++)
        check_close(get_el(bufs[k], dt, i), expected(ops[meta[k][1]], dt, i), dt, hvds_dtype_name(dt), i);
      free(bufs[k]);
    }
  }
  /* Out of place, prescale and postscale. */
  float in[5] = {1, 2, 3, 4, 5}, out[5];
  hvds_tensor_t ti = tensor1(in, HVDS_FLOAT32, 5), to = tensor1(out, HVDS_FLOAT32, 5);
  hvds_op_options_t opt = HVDS_OP_OPTIONS_INIT;
  opt.name = "ar.scaled";
  opt.prescale = 2.0;
  opt.postscale = 0.5;
  hvds_handle_t h;
  CHECK_OK(hvds_allreduce_async(&ti, &to, &opt, &h));
  wait_ok(h, "scaled");
  for (int i = 0; i < 5; i++) check_close(out[i], in[i] * size_, HVDS_FLOAT32, "scaled", i);
  hvds_release(h);
  /* Grouped. */
  float g[3][4];
  hvds_tensor_t gt[3];
  for (int k = 0; k < 3; k++) {
    for (int i = 0; i < 4; i++) g[k][i] = (float)(k + rank_);
    gt[k] = tensor1(g[k], HVDS_FLOAT32, 4);
  }
  opt = (hvds_op_options_t)HVDS_OP_OPTIONS_INIT;
  opt.name = "grouped";
  CHECK_OK(hvds_grouped_allreduce_async(3, gt, gt, &opt, &h));
  wait_ok(h, "grouped");
  for (int k = 0; k < 3; k++)
    check_close(g[k][0], k * size_ + size_ * (size_ - 1) / 2.0, HVDS_FLOAT32, "grouped", k);
  hvds_release(h);
}

static void scenario_allgather(void) {
  for (int dt = 0; dt < HVDS_DTYPE_COUNT; dt++) {
    int rows = rank_ + 1; /* the first dimension differs per rank */
    size_t esz = hvds_dtype_size(dt);
    void* buf = malloc((size_t)rows * 3 * esz);
    for (int i = 0; i < rows * 3; i++) set_el(buf, dt, (size_t)i, rank_ % 2 == 0 && dt == HVDS_BOOL ? 0 : (rank_ + 1) % 100);
    hvds_tensor_t t = {buf, dt, -1, 2, {rows, 3}};
    hvds_op_options_t opt = HVDS_OP_OPTIONS_INIT;
    char name[64];
    snprintf(name, sizeof(name), "ag.%d", dt);
    opt.name = name;
    hvds_handle_t h;
    CHECK_OK(hvds_allgather_async(&t, &opt, &h));
    wait_ok(h, name);
    hvds_tensor_t out;
    CHECK_OK(hvds_handle_output(h, 0, &out));
    int64_t want_rows = (int64_t)size_ * (size_ + 1) / 2;
    if (out.ndim != 2 || out.shape[0] != want_rows || out.shape[1] != 3)
      FAIL("allgather %s: shape [%lld, %lld]", name, (long long)out.shape[0], (long long)out.shape[1]);
    size_t i = 0;
    for (int r = 0; r < size_; r++)
      for (int k = 0; k < (r + 1) * 3; k++, i++) {
        double want = r % 2 == 0 && dt == HVDS_BOOL ? 0 : (r + 1) % 100;
        if (dt == HVDS_BOOL) want = want != 0;
        check_close(get_el(out.data, dt, i), want, dt, name, i);
      }
    hvds_release(h);
    free(buf);
  }
}

static void scenario_broadcast(void) {
  for (int root = 0; root < size_; root++)
    for (int dt = 0; dt < HVDS_DTYPE_COUNT; dt++) {
      size_t n = 1000;
      void* buf = malloc(n * hvds_dtype_size(dt));
      for (size_t i = 0; i < n; i++) set_el(buf, dt, i, rank_ == root ? (double)(i % 7 + root % 2) : 0);
      hvds_tensor_t t = tensor1(buf, dt, (int64_t)n);
      hvds_op_options_t opt = HVDS_OP_OPTIONS_INIT;
      char name[64];
      snprintf(name, sizeof(name), "bc.%d.%d", root, dt);
      opt.name = name;
      opt.root_rank = root;
      hvds_handle_t h;
      CHECK_OK(hvds_broadcast_async(&t, &opt, &h));
      wait_ok(h, name);
      for (size_t i = 0; i < n; i++) {
        double want = (double)(i % 7 + root % 2);
        if (dt == HVDS_BOOL) want = want != 0;
        check_close(get_el(buf, dt, i), want, dt, name, i);
      }
      hvds_release(h);
      free(buf);
    }
}

static void scenario_alltoall(void) {
  /* Rank r sends (r + k) % 3 rows of width 2 to rank k, each row holding 100 * r + k. */
  int32_t splits[64];
  int total = 0;
  for (int k = 0; k < size_; k++) total += (splits[k] = (rank_ + k) % 3);
  int32_t* data = malloc((size_t)(total ? total : 1) * 2 * sizeof(int32_t));
  int row = 0;
  for (int k = 0; k < size_; k++)
    for (int j = 0; j < splits[k]; j++, row++) data[row * 2] = data[row * 2 + 1] = 100 * rank_ + k;
  hvds_tensor_t t = {data, HVDS_INT32, -1, 2, {total, 2}};
  hvds_op_options_t opt = HVDS_OP_OPTIONS_INIT;
  opt.name = "a2a";
  opt.splits = splits;
  opt.nsplits = size_;
  hvds_handle_t h;
  CHECK_OK(hvds_alltoall_async(&t, &opt, &h));
  wait_ok(h, "alltoall");
  hvds_tensor_t out;
  CHECK_OK(hvds_handle_output(h, 0, &out));
  const int32_t* rs;
  int32_t nrs = hvds_handle_splits(h, &rs);
  if (nrs != size_) FAIL("alltoall: %d received splits", nrs);
  int32_t* o = out.data;
  row = 0;
  for (int r = 0; r < size_; r++) {
    if (rs[r] != (r + rank_) % 3) FAIL("alltoall: split from %d is %d", r, rs[r]);
    for (int j = 0; j < rs[r]; j++, row++)
      if (o[row * 2] != 100 * r + rank_) FAIL("alltoall: row %d is %d", row, o[row * 2]);
  }
  if (out.shape[0] != row) FAIL("alltoall: %lld rows, expected %d", (long long)out.shape[0], row);
  hvds_release(h);
  free(data);
}

static void scenario_reducescatter(void) {
  for (int dim0 = 1; dim0 <= 2 * size_ + 1; dim0 += size_) {
    float* in = malloc((size_t)dim0 * 4 * sizeof(float));
    for (int i = 0; i < dim0 * 4; i++) in[i] = (float)(i + rank_);
    hvds_tensor_t t = {in, HVDS_FLOAT32, -1, 2, {dim0, 4}};
    hvds_op_options_t opt = HVDS_OP_OPTIONS_INIT;
    char name[64];
    snprintf(name, sizeof(name), "rs.%d", dim0);
    opt.name = name;
    opt.op = HVDS_AVERAGE;
    hvds_handle_t h;
    CHECK_OK(hvds_reducescatter_async(&t, &opt, &h));
    wait_ok(h, name);
    hvds_tensor_t out;
    CHECK_OK(hvds_handle_output(h, 0, &out));
    int mine = dim0 / size_ + (rank_ < dim0 % size_ ? 1 : 0);
    int first = 0;
    for (int r = 0; r < rank_; r++) first += dim0 / size_ + (r < dim0 % size_ ? 1 : 0);
    if (out.shape[0] != mine) FAIL("%s: %lld rows, expected %d", name, (long long)out.shape[0], mine);
    const float* o = out.data;
    for (int i = 0; i < mine * 4; i++)
      check_close(o[i], first * 4 + i + (size_ - 1) / 2.0, HVDS_FLOAT32, name, (size_t)i);
    hvds_release(h);
    free(in);
  }
}

static void scenario_barrier(void) {
  for (int i = 0; i < 20; i++) {
    hvds_handle_t h;
    CHECK_OK(hvds_barrier_async(0, &h));
    wait_ok(h, "barrier");
    hvds_release(h);
  }
}

/* Rank r runs r + 1 steps, then joins; joined ranks contribute zeros. */
static void scenario_join(void) {
  for (int step = 0; step < size_; step++) {
    if (step > rank_) break;
    float v[4] = {1, 1, 1, 1};
    hvds_tensor_t t = tensor1(v, HVDS_FLOAT32, 4);
    hvds_op_options_t opt = HVDS_OP_OPTIONS_INIT;
    char name[32];
    snprintf(name, sizeof(name), "step.%d", step);
    opt.name = name;
    hvds_handle_t h;
    CHECK_OK(hvds_allreduce_async(&t, &t, &opt, &h));
    wait_ok(h, name);
    /* Ranks below step have joined: size - step ranks contribute ones. */
    check_close(v[0], size_ - step, HVDS_FLOAT32, name, 0);
    hvds_release(h);
  }
  hvds_handle_t h;
  CHECK_OK(hvds_join_async(&h));
  wait_ok(h, "join");
  int last = hvds_handle_join_rank(h);
  if (last != size_ - 1) FAIL("join: last joined rank %d, expected %d", last, size_ - 1);
  hvds_release(h);
}

/* Each mismatch fails on every rank with Horovod's text, and the next op still works. */
static void expect_error(hvds_handle_t h, const char* text) {
  hvds_result_t rc = hvds_wait(h, 60000);
  if (rc != HVDS_PRECONDITION_ERROR) FAIL("expected a precondition error with '%s', got %s", text, hvds_result_str(rc));
  if (strstr(hvds_handle_error(h), text) == NULL) FAIL("message '%s' lacks '%s'", hvds_handle_error(h), text);
  printf("rank %d got: %s\n", rank_, hvds_handle_error(h));
  hvds_release(h);
}

static void scenario_errors(void) {
  if (size_ < 2) { printf("note: errors need np >= 2\n"); return; }
  float f[17 * 18];
  int32_t i32[8];
  hvds_handle_t h;
  hvds_op_options_t opt = HVDS_OP_OPTIONS_INIT;
  /* dtype */
  opt.name = "err.dtype";
  hvds_tensor_t t = rank_ == 0 ? tensor1(f, HVDS_FLOAT32, 8) : tensor1(i32, HVDS_INT32, 8);
  CHECK_OK(hvds_allreduce_async(&t, &t, &opt, &h));
  expect_error(h, "Mismatched data types: One rank had type");
  /* shape */
  opt.name = "err.shape";
  hvds_tensor_t s = {f, HVDS_FLOAT32, -1, 2, {17, rank_ == 0 ? 17 : 18}};
  CHECK_OK(hvds_allreduce_async(&s, &s, &opt, &h));
  expect_error(h, "Mismatched ALLREDUCE tensor shapes: One rank sent a tensor of shape [17, 1");
  /* operation */
  opt.name = "err.op";
  t = tensor1(f, HVDS_FLOAT32, 8);
  if (rank_ == 0) CHECK_OK(hvds_allreduce_async(&t, &t, &opt, &h));
  else CHECK_OK(hvds_allgather_async(&t, &opt, &h));
  expect_error(h, "Mismatched operations: One rank did an");
  /* reduce op */
  opt.name = "err.redop";
  opt.op = rank_ == 0 ? HVDS_SUM : HVDS_MAX;
  CHECK_OK(hvds_allreduce_async(&t, &t, &opt, &h));
  expect_error(h, "Mismatched reduction operation");
  opt.op = HVDS_SUM;
  /* scale factors */
  opt.name = "err.scale";
  opt.prescale = rank_ == 0 ? 1.0 : 2.0;
  CHECK_OK(hvds_allreduce_async(&t, &t, &opt, &h));
  expect_error(h, "Mismatched prescale and/or postscale factors");
  opt.prescale = 1.0;
  /* root rank */
  opt.name = "err.root";
  opt.root_rank = rank_ == 0 ? 0 : 1;
  CHECK_OK(hvds_broadcast_async(&t, &opt, &h));
  expect_error(h, "Mismatched BROADCAST root ranks");
  opt.root_rank = 0;
  /* allgather trailing dimension */
  opt.name = "err.agdim";
  hvds_tensor_t a = {f, HVDS_FLOAT32, -1, 2, {2, rank_ == 0 ? 3 : 4}};
  CHECK_OK(hvds_allgather_async(&a, &opt, &h));
  expect_error(h, "Mismatched ALLGATHER tensor shapes");
  /* Duplicate name: refused at once on the caller's thread. Each rank in turn submits first
   * and retries while the others have not submitted, so the first is certainly in flight. */
  for (int turn = 0; turn < size_; turn++) {
    char dup[32];
    snprintf(dup, sizeof(dup), "dup.%d", turn);
    opt.name = dup;
    hvds_handle_t h1, h2, hb;
    if (rank_ == turn) {
      CHECK_OK(hvds_allreduce_async(&t, &t, &opt, &h1));
      hvds_result_t rc = hvds_allreduce_async(&t, &t, &opt, &h2);
      if (rc != HVDS_INVALID_ARGUMENT || strstr(hvds_last_error(), "same name") == NULL)
        FAIL("duplicate name: %s %s", hvds_result_str(rc), hvds_last_error());
      CHECK_OK(hvds_barrier_async(0, &hb));
      wait_ok(hb, "barrier");
    } else {
      CHECK_OK(hvds_barrier_async(0, &hb));
      wait_ok(hb, "barrier");
      CHECK_OK(hvds_allreduce_async(&t, &t, &opt, &h1));
    }
    hvds_release(hb);
    wait_ok(h1, "dup");
    hvds_release(h1);
  }
  /* Still usable. */
  for (int i = 0; i < 8; i++) f[i] = 1;
  opt.name = "after.errors";
  CHECK_OK(hvds_allreduce_async(&t, &t, &opt, &h));
  wait_ok(h, "after errors");
  check_close(f[0], size_, HVDS_FLOAT32, "after errors", 0);
  hvds_release(h);
}

static void scenario_reinit(void) {
  for (int round = 0; round < 3; round++) {
    if (round > 0) CHECK_OK(hvds_init());
    if (!hvds_is_initialized()) FAIL("not initialized after init");
    float v = 1;
    hvds_tensor_t t = tensor1(&v, HVDS_FLOAT32, 1);
    hvds_op_options_t opt = HVDS_OP_OPTIONS_INIT;
    opt.name = "reinit";
    hvds_handle_t h;
    CHECK_OK(hvds_allreduce_async(&t, &t, &opt, &h));
    wait_ok(h, "reinit");
    check_close(v, size_, HVDS_FLOAT32, "reinit", 0);
    hvds_release(h);
    CHECK_OK(hvds_shutdown());
    if (hvds_is_initialized() || hvds_rank() != -1) FAIL("still initialized after shutdown");
  }
  CHECK_OK(hvds_init());
}

static void scenario_process_sets(void) {
  if (size_ < 2) { printf("note: process_sets need np >= 2\n"); return; }
  int32_t ranks[2] = {0, size_ - 1};
  int32_t id;
  CHECK_OK(hvds_add_process_set(ranks, 2, &id));
  /* At np 2 the ranks are everyone: the global set's id comes back, as in Horovod. */
  if (size_ == 2 ? id != 0 : id <= 0) FAIL("process set id %d", id);
  int member = rank_ == 0 || rank_ == size_ - 1;
  if (hvds_process_set_included(id) != member) FAIL("included");
  if (member) {
    float v = (float)rank_;
    hvds_tensor_t t = tensor1(&v, HVDS_FLOAT32, 1);
    hvds_op_options_t opt = HVDS_OP_OPTIONS_INIT;
    opt.name = "ps.sum";
    opt.process_set = id;
    hvds_handle_t h;
    CHECK_OK(hvds_allreduce_async(&t, &t, &opt, &h));
    wait_ok(h, "ps allreduce");
    check_close(v, size_ - 1, HVDS_FLOAT32, "process set sum", 0);
    hvds_release(h);
    /* Broadcast root is relative to the set: set rank 1 is global rank size-1. */
    float b = rank_ == size_ - 1 ? 42.0f : 0.0f;
    t = tensor1(&b, HVDS_FLOAT32, 1);
    opt.name = "ps.bcast";
    opt.root_rank = 1;
    CHECK_OK(hvds_broadcast_async(&t, &opt, &h));
    wait_ok(h, "ps broadcast");
    check_close(b, 42, HVDS_FLOAT32, "process set broadcast", 0);
    hvds_release(h);
  } else {
    float v = 0;
    hvds_tensor_t t = tensor1(&v, HVDS_FLOAT32, 1);
    hvds_op_options_t opt = HVDS_OP_OPTIONS_INIT;
    opt.name = "ps.sum";
    opt.process_set = id;
    hvds_handle_t h;
    if (hvds_allreduce_async(&t, &t, &opt, &h) != HVDS_INVALID_ARGUMENT ||
        strstr(hvds_last_error(), "is not a member") == NULL)
      FAIL("a non-member was not refused: %s", hvds_last_error());
  }
  hvds_handle_t h;
  CHECK_OK(hvds_barrier_async(0, &h));
  wait_ok(h, "barrier");
  hvds_release(h);
  if (id == 0) return;
  CHECK_OK(hvds_remove_process_set(id));
  if (hvds_process_set_size(id) != -1) FAIL("set %d still exists", id);
}

/* 1000 tensors of 4 KiB per step: reports the step time and one allreduce of the total. */
static void scenario_fusion(void) {
  enum { N = 1000, EL = 1024 };
  float* data = malloc((size_t)N * EL * sizeof(float));
  hvds_handle_t* hs = malloc(N * sizeof(hvds_handle_t));
  char name[32];
  double best_step = 1e9, best_one = 1e9;
  for (int iter = 0; iter < 12; iter++) {
    for (size_t i = 0; i < (size_t)N * EL; i++) data[i] = 1;
    double t0 = now();
    for (int k = 0; k < N; k++) {
      hvds_tensor_t t = tensor1(data + (size_t)k * EL, HVDS_FLOAT32, EL);
      hvds_op_options_t opt = HVDS_OP_OPTIONS_INIT;
      snprintf(name, sizeof(name), "grad.%d", k);
      opt.name = name;
      CHECK_OK(hvds_allreduce_async(&t, &t, &opt, &hs[k]));
    }
    for (int k = 0; k < N; k++) {
      wait_ok(hs[k], "fused");
      hvds_release(hs[k]);
    }
    double step = now() - t0;
    if (data[0] != size_ || data[(size_t)N * EL - 1] != size_) FAIL("fused result %g", data[0]);
    hvds_tensor_t all = tensor1(data, HVDS_FLOAT32, (int64_t)N * EL);
    hvds_op_options_t opt = HVDS_OP_OPTIONS_INIT;
    opt.name = "whole";
    hvds_handle_t h;
    t0 = now();
    CHECK_OK(hvds_allreduce_async(&all, &all, &opt, &h));
    wait_ok(h, "whole");
    double one = now() - t0;
    hvds_release(h);
    if (iter >= 2) {
      if (step < best_step) best_step = step;
      if (one < best_one) best_one = one;
    }
  }
  if (rank_ == 0)
    printf("fusion: 1000 x 4 KiB step %.3f ms, one 4 MB allreduce %.3f ms, ratio %.2f\n",
           best_step * 1e3, best_one * 1e3, best_step / best_one);
  free(data);
  free(hs);
}

/* Rank size-1 dies by SIGKILL in the middle of a 256 MiB allreduce. */
static void scenario_kill(void) {
  size_t n = (size_t)64 << 20; /* floats = 256 MiB */
  float* data = calloc(n, sizeof(float));
  hvds_tensor_t t = tensor1(data, HVDS_FLOAT32, (int64_t)n);
  hvds_op_options_t opt = HVDS_OP_OPTIONS_INIT;
  opt.name = "big";
  hvds_handle_t h;
  CHECK_OK(hvds_allreduce_async(&t, &t, &opt, &h));
  if (rank_ == size_ - 1) {
    usleep(300000);
    raise(SIGKILL);
  }
  hvds_result_t rc = hvds_wait(h, 120000);
  if (rc == HVDS_SUCCESS) FAIL("allreduce succeeded although a rank died");
  printf("rank %d error: %s\n", rank_, hvds_handle_error(h));
  fflush(stdout);
  exit(3);
}

/* Rank 1 never submits; the stall inspector warns, then fails the tensor on rank 0. */
static void scenario_stall(void) {
  if (size_ < 2) { printf("note: stall needs np >= 2\n"); return; }
  if (rank_ == 0) {
    float v = 1;
    hvds_tensor_t t = tensor1(&v, HVDS_FLOAT32, 1);
    hvds_op_options_t opt = HVDS_OP_OPTIONS_INIT;
    opt.name = "lonely";
    hvds_handle_t h;
    CHECK_OK(hvds_allreduce_async(&t, &t, &opt, &h));
    hvds_result_t rc = hvds_wait(h, 60000);
    if (rc != HVDS_PRECONDITION_ERROR || strstr(hvds_handle_error(h), "Missing ranks") == NULL)
      FAIL("stall: %s %s", hvds_result_str(rc), hvds_handle_error(h));
    hvds_release(h);
  } else {
    sleep(6);
  }
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: worker SCENARIO\n");
    return 2;
  }
  CHECK_OK(hvds_init());
  rank_ = hvds_rank();
  size_ = hvds_size();
  const char* s = argv[1];
  if (!strcmp(s, "basics")) {
    const char* r = getenv("HVDSPARSE_RANK");
    if (r && atoi(r) != rank_) FAIL("rank %d, env says %s", rank_, r);
    if (hvds_local_rank() < 0 || hvds_cross_rank() < 0 || hvds_local_size() < 1) FAIL("local/cross");
    if (!hvds_gloo_built()) FAIL("gloo_built");
  } else if (!strcmp(s, "allreduce")) scenario_allreduce();
  else if (!strcmp(s, "allgather")) scenario_allgather();
  else if (!strcmp(s, "broadcast")) scenario_broadcast();
  else if (!strcmp(s, "alltoall")) scenario_alltoall();
  else if (!strcmp(s, "reducescatter")) scenario_reducescatter();
  else if (!strcmp(s, "barrier")) scenario_barrier();
  else if (!strcmp(s, "join")) scenario_join();
  else if (!strcmp(s, "errors")) scenario_errors();
  else if (!strcmp(s, "reinit")) scenario_reinit();
  else if (!strcmp(s, "process_sets")) scenario_process_sets();
  else if (!strcmp(s, "fusion")) scenario_fusion();
  else if (!strcmp(s, "kill")) scenario_kill();
  else if (!strcmp(s, "stall")) scenario_stall();
  else if (!strcmp(s, "lane")) scenario_lane(rank_, size_);
  else if (!strcmp(s, "wake")) scenario_wake(rank_, size_);
  else if (!strcmp(s, "deadlock"))
    scenario_deadlock(rank_, size_);
  else FAIL("unknown scenario %s", s);
  CHECK_OK(hvds_shutdown());
  printf("PASS %s rank %d of %d\n", s, rank_, size_);
  return 0;
}
