/* C API misuse, run as `hvdsparse run -np N misuse_worker` (N >= 1): NULL pointers, negative,
 * huge and overflowing counts, unknown dtypes and ops, out-of-range ranks and sets, bad splits,
 * zero-size tensors, NaN and Inf values, handles that do not exist, calls before init and after
 * shutdown. Each case must give a clear error (a status other than success and a message) or the
 * correct result; a crash fails the test by itself. Every rank runs the same cases in the same
 * order, so the calls that do reach negotiation match. Prints "ok <case>" per case, "MISUSE FAIL
 * <case>: ..." on a wrong answer, and "PASS misuse rank R of N" at the end when all held. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/worker_tensors.h"
#include "hvdsparse.h"

static int rank_ = -1, size_ = 1, failures_;

static void report(int ok, const char* what, const char* detail) {
  if (ok) {
    if (rank_ <= 0) printf("ok %s\n", what);
  } else {
    printf("MISUSE FAIL rank %d %s: %s\n", rank_, what, detail);
    failures_++;
  }
  fflush(stdout);
}

/* rc must be an error (want, or any error when want is HVDS_SUCCESS) with a non-empty message. */
static void expect_error(hvds_result_t rc, hvds_result_t want, const char* what) {
  char detail[512];
  const char* msg = hvds_last_error();
  snprintf(detail, sizeof(detail), "got %s (%s)", hvds_result_str(rc), msg ? msg : "(null)");
  int ok = rc != HVDS_SUCCESS && (want == HVDS_SUCCESS || rc == want) && msg && msg[0];
  report(ok, what, detail);
}

/* Runs an allreduce that must succeed; returns its status for the caller's checks. */
static hvds_result_t allreduce_wait(hvds_tensor_t* t, hvds_op_options_t* o) {
  hvds_handle_t h;
  hvds_result_t rc = hvds_allreduce_async(t, t, o, &h);
  if (rc != HVDS_SUCCESS) return rc;
  rc = hvds_wait(h, 60000);
  hvds_release(h);
  return rc;
}

static void before_init(void) {
  float x = 1;
  hvds_tensor_t t = tensor1(&x, HVDS_FLOAT32, 1);
  hvds_op_options_t o = named("before.init");
  hvds_handle_t h = 0;
  expect_error(hvds_allreduce_async(&t, &t, &o, &h), HVDS_INVALID_USAGE, "allreduce before init");
  report(hvds_rank() == -1 && hvds_size() == -1, "queries are -1 before init", "not -1");
  report(hvds_poll(1) == -1, "poll of no handle before init", "not -1");
  expect_error(hvds_wait(1, 10), HVDS_INVALID_ARGUMENT, "wait of no handle before init");
  hvds_release(1);
  report(hvds_shutdown() == HVDS_SUCCESS, "shutdown before init is harmless", "failed");
  expect_error(hvds_barrier_async(0, &h), HVDS_INVALID_USAGE, "barrier before init");
}

/* Arguments refused on the caller's thread, before anything reaches the other ranks. */
static void bad_arguments(void) {
  float x[4] = {1, 2, 3, 4};
  hvds_tensor_t t = tensor1(x, HVDS_FLOAT32, 4);
  hvds_op_options_t o = named("bad");
  hvds_handle_t h = 0;
  expect_error(hvds_allreduce_async(NULL, NULL, &o, &h), HVDS_INVALID_ARGUMENT, "NULL tensors");
  expect_error(hvds_allreduce_async(&t, &t, NULL, &h), HVDS_INVALID_ARGUMENT, "NULL options");
  expect_error(hvds_allreduce_async(&t, &t, &o, NULL), HVDS_INVALID_ARGUMENT, "NULL handle");
  hvds_op_options_t noname = HVDS_OP_OPTIONS_INIT;
  expect_error(hvds_allreduce_async(&t, &t, &noname, &h), HVDS_INVALID_ARGUMENT, "NULL name");
  hvds_tensor_t nodata = tensor1(NULL, HVDS_FLOAT32, 4);
  expect_error(hvds_allreduce_async(&nodata, &nodata, &o, &h), HVDS_INVALID_ARGUMENT, "NULL data");
  expect_error(hvds_allgather_async(&nodata, &o, &h), HVDS_INVALID_ARGUMENT, "allgather NULL data");
  hvds_tensor_t neg = tensor1(x, HVDS_FLOAT32, -4);
  expect_error(hvds_allreduce_async(&neg, &neg, &o, &h), HVDS_INVALID_ARGUMENT, "negative count");
  expect_error(hvds_broadcast_async(&neg, &o, &h), HVDS_INVALID_ARGUMENT, "broadcast negative count");
  hvds_tensor_t huge = tensor1(x, HVDS_FLOAT32, INT64_MAX);
  expect_error(hvds_allreduce_async(&huge, &huge, &o, &h), HVDS_INVALID_ARGUMENT, "count INT64_MAX");
  hvds_tensor_t over = {x, HVDS_FLOAT64, -1, 3, {1 << 30, 1 << 30, 1 << 30}};
  expect_error(hvds_allgather_async(&over, &o, &h), HVDS_INVALID_ARGUMENT, "element count overflows");
  hvds_tensor_t bytes_over = tensor1(x, HVDS_FLOAT64, INT64_MAX / 4);
  expect_error(hvds_reducescatter_async(&bytes_over, &o, &h), HVDS_INVALID_ARGUMENT,
               "byte count overflows");
  hvds_tensor_t deep = t;
  deep.ndim = 1000;
  expect_error(hvds_allreduce_async(&deep, &deep, &o, &h), HVDS_INVALID_ARGUMENT, "ndim 1000");
  deep.ndim = -1;
  expect_error(hvds_allreduce_async(&deep, &deep, &o, &h), HVDS_INVALID_ARGUMENT, "ndim -1");
  for (int dt = -1; dt <= 99; dt += 100 - HVDS_DTYPE_COUNT) {
    hvds_tensor_t bad = tensor1(x, (hvds_dtype_t)dt, 4);
    char what[64];
    snprintf(what, sizeof(what), "dtype %d", dt);
    expect_error(hvds_allreduce_async(&bad, &bad, &o, &h), HVDS_INVALID_ARGUMENT, what);
  }
  hvds_tensor_t dt_out = tensor1(x, HVDS_INT32, 4);
  expect_error(hvds_allreduce_async(&t, &dt_out, &o, &h), HVDS_INVALID_ARGUMENT, "output dtype differs");
  hvds_tensor_t short_out = tensor1(x, HVDS_FLOAT32, 3);
  expect_error(hvds_allreduce_async(&t, &short_out, &o, &h), HVDS_INVALID_ARGUMENT, "output smaller");
  o.op = HVDS_ADASUM;
  hvds_tensor_t ints = tensor1(x, HVDS_INT32, 4);
  expect_error(hvds_allreduce_async(&ints, &ints, &o, &h), HVDS_INVALID_ARGUMENT, "Adasum int32");
  o.op = (hvds_reduce_op_t)42;
  expect_error(hvds_allreduce_async(&t, &t, &o, &h), HVDS_INVALID_ARGUMENT, "reduce op 42");
  o.op = (hvds_reduce_op_t)-3;
  expect_error(hvds_allreduce_async(&t, &t, &o, &h), HVDS_INVALID_ARGUMENT, "reduce op -3");
  o = named("bad");
  for (int ps = -1; ps <= 100000; ps += 100001) {
    o.process_set = ps;
    char what[64];
    snprintf(what, sizeof(what), "process set %d", ps);
    expect_error(hvds_allreduce_async(&t, &t, &o, &h), HVDS_INVALID_ARGUMENT, what);
  }
  o.process_set = 0;
  t.device = 3;
  expect_error(hvds_allreduce_async(&t, &t, &o, &h), HVDS_SUCCESS, "device 3 (no such GPU)");
  t.device = -1;
  expect_error(hvds_grouped_allreduce_async(0, &t, &t, &o, &h), HVDS_INVALID_ARGUMENT, "group of 0");
  expect_error(hvds_grouped_allreduce_async(-5, &t, &t, &o, &h), HVDS_INVALID_ARGUMENT, "group of -5");
  expect_error(hvds_grouped_allreduce_async(2, NULL, NULL, &o, &h), HVDS_INVALID_ARGUMENT, "group NULL");
  expect_error(hvds_barrier_async(77, &h), HVDS_INVALID_ARGUMENT, "barrier of set 77");
}

/* Handles and helpers given values that were never returned. */
static void bad_handles(void) {
  const hvds_handle_t bogus[] = {0, -1, 123456789, INT64_MAX, INT64_MIN};
  for (size_t i = 0; i < sizeof(bogus) / sizeof(bogus[0]); i++) {
    hvds_handle_t b = bogus[i];
    char what[96];
    snprintf(what, sizeof(what), "handle %lld", (long long)b);
    report(hvds_poll(b) == -1, what, "poll not -1");
    expect_error(hvds_wait(b, 100), HVDS_INVALID_ARGUMENT, what);
    hvds_tensor_t out;
    report(hvds_handle_output(b, 0, &out) != HVDS_SUCCESS, what, "output of a bogus handle");
    report(hvds_handle_take_output(b, 0) == NULL, what, "take_output not NULL");
    const int32_t* splits = NULL;
    report(hvds_handle_splits(b, &splits) == -1, what, "splits not -1");
    report(hvds_handle_join_rank(b) == -1, what, "join rank not -1");
    report(hvds_handle_error(b) != NULL, what, "NULL error text");
    hvds_release(b);
  }
  report(hvds_dtype_size((hvds_dtype_t)99) == 0, "dtype_size(99) is 0", "not 0");
  report(hvds_dtype_name((hvds_dtype_t)-7) != NULL, "dtype_name(-7) is text", "NULL");
  report(hvds_result_str((hvds_result_t)1000) != NULL, "result_str(1000) is text", "NULL");
  hvds_free(NULL);
}

/* A done handle asked for outputs that do not exist, twice released, NULL out-parameters. */
static void handle_edges(void) {
  int32_t v[3] = {rank_, rank_, rank_};
  hvds_tensor_t t = tensor1(v, HVDS_INT32, 3);
  hvds_op_options_t o = named("edges.ag");
  hvds_handle_t h;
  hvds_result_t rc = hvds_allgather_async(&t, &o, &h);
  if (rc == HVDS_SUCCESS) rc = hvds_wait(h, 60000);
  report(rc == HVDS_SUCCESS, "allgather for handle edges", hvds_result_str(rc));
  hvds_tensor_t out;
  report(hvds_handle_output(h, 1, &out) == HVDS_INVALID_ARGUMENT, "output index 1 of 1", "not refused");
  report(hvds_handle_output(h, -1, &out) == HVDS_INVALID_ARGUMENT, "output index -1", "not refused");
  report(hvds_handle_output(h, 0, NULL) == HVDS_INVALID_ARGUMENT, "output into NULL", "not refused");
  report(hvds_handle_splits(h, NULL) == -1, "splits into NULL", "not refused");
  void* p = hvds_handle_take_output(h, 0);
  report(p != NULL && hvds_handle_take_output(h, 0) == NULL, "output taken once", "taken twice");
  hvds_free(p);
  hvds_release(h);
  hvds_release(h);
  report(hvds_poll(h) == -1, "released handle is gone", "still known");
}

/* An operation that must fail: refused at enqueue (rc), or failed at wait with a message. */
static void expect_op_error(hvds_result_t rc, const hvds_handle_t* hp, const char* what) {
  hvds_handle_t h = *hp; /* read after the enqueue call set it */
  if (rc != HVDS_SUCCESS) {
    expect_error(rc, HVDS_SUCCESS, what);
    return;
  }
  rc = hvds_wait(h, 60000);
  char detail[600];
  snprintf(detail, sizeof(detail), "wait gave %s (%s)", hvds_result_str(rc), hvds_handle_error(h));
  report(rc != HVDS_SUCCESS && rc != HVDS_TIMEOUT && hvds_handle_error(h)[0], what, detail);
  hvds_release(h);
}

/* Collectives whose arguments every rank gets wrong in the same way. */
static void bad_collective_arguments(void) {
  int32_t rows[16] = {0};
  hvds_tensor_t t = {rows, HVDS_INT32, -1, 2, {4, 2}};
  hvds_handle_t h = 0;
  const int32_t roots[] = {-1, size_, 1 << 30};
  for (int i = 0; i < 3; i++) {
    char what[64];
    snprintf(what, sizeof(what), "broadcast root %d", roots[i]);
    hvds_op_options_t o = named(what);
    o.root_rank = roots[i];
    expect_op_error(hvds_broadcast_async(&t, &o, &h), &h, what);
  }
  int32_t splits[66];
  hvds_op_options_t o = named("a2a.nsplits");
  for (int k = 0; k < size_ + 1; k++) splits[k] = 0;
  splits[0] = 4;
  o.splits = splits;
  o.nsplits = size_ + 1;
  expect_op_error(hvds_alltoall_async(&t, &o, &h), &h, "alltoall with size + 1 splits");
  o = named("a2a.negative");
  for (int k = 0; k < size_; k++) splits[k] = 0;
  splits[0] = -1;
  if (size_ > 1) splits[size_ - 1] += 5; /* adds up to the 4 rows */
  o.splits = splits;
  o.nsplits = size_;
  expect_op_error(hvds_alltoall_async(&t, &o, &h), &h, "alltoall with a negative split");
  o = named("a2a.toomany");
  for (int k = 0; k < size_; k++) splits[k] = 1000;
  o.splits = splits;
  o.nsplits = size_;
  expect_op_error(hvds_alltoall_async(&t, &o, &h), &h, "alltoall splits beyond the rows");
  if (size_ > 1) {
    hvds_tensor_t odd = {rows, HVDS_INT32, -1, 2, {size_ + 1, 2}};
    o = named("a2a.uneven");
    expect_op_error(hvds_alltoall_async(&odd, &o, &h), &h, "alltoall of rows not divisible by size");
  }
  float one = 1;
  hvds_tensor_t scalar = {&one, HVDS_FLOAT32, -1, 0, {0}};
  o = named("rs.scalar");
  expect_op_error(hvds_reducescatter_async(&scalar, &o, &h), &h, "reducescatter of a scalar");
  o = named("ag.scalar");
  expect_op_error(hvds_allgather_async(&scalar, &o, &h), &h, "allgather of a scalar");
}

static int is_nan16(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }
static int is_nanb16(uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x7f); }
static double half_value(uint16_t h, int bf) {
  if (bf) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
  }
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e == 31 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -v : v;
}

/* The elements of the NaN/Inf test: rank-dependent inputs and the IEEE sum of them. */
enum { NF = 6 };
static double nf_input(int e) {
  switch (e) {
    case 0: return rank_ == 0 ? NAN : 1;                                     /* NaN + x = NaN */
    case 1: return rank_ == 0 ? INFINITY : 1;                                /* Inf + x = Inf */
    case 2: return rank_ == 0 ? INFINITY : rank_ == 1 ? -INFINITY : 0;      /* Inf - Inf = NaN */
    case 3: return -INFINITY;                                                 /* -Inf stays */
    case 4: return 1;                                                         /* finite: size */
    default: return 60000;                                                    /* f16 overflow */
  }
}
static double nf_sum(int e, int dt) {
  switch (e) {
    case 0: return NAN;
    case 1: return INFINITY;
    case 2: return size_ > 1 ? NAN : INFINITY;
    case 3: return -INFINITY;
    case 4: return size_;
    default: return dt == HVDS_FLOAT16 && size_ > 1 ? INFINITY : 60000.0 * size_;
  }
}

static void put(void* buf, int dt, int i, double v) {
  if (dt == HVDS_FLOAT32) ((float*)buf)[i] = (float)v;
  if (dt == HVDS_FLOAT64) ((double*)buf)[i] = v;
  if (dt == HVDS_FLOAT16 || dt == HVDS_BFLOAT16) {
    float f = (float)v;
    uint32_t bits;
    memcpy(&bits, &f, 4);
    uint16_t h;
    if (dt == HVDS_BFLOAT16) {
      h = isnan(v) ? 0x7fc0 : (uint16_t)(bits >> 16);
    } else if (isnan(v)) {
      h = 0x7e00;
    } else if (isinf(v)) {
      h = v > 0 ? 0x7c00 : 0xfc00;
    } else { /* the test's finite values are exact halves: 0, 1, 60000 */
      int ex;
      double m = frexp(fabs(v), &ex);
      h = v == 0 ? 0 : (uint16_t)(((ex + 14) << 10) | ((int)(m * 2048) & 1023));
    }
    ((uint16_t*)buf)[i] = h;
  }
}

static double get(const void* buf, int dt, int i, int* nan) {
  double v = 0;
  if (dt == HVDS_FLOAT32) v = ((const float*)buf)[i];
  if (dt == HVDS_FLOAT64) v = ((const double*)buf)[i];
  if (dt == HVDS_FLOAT16 || dt == HVDS_BFLOAT16) {
    uint16_t h = ((const uint16_t*)buf)[i];
    *nan = dt == HVDS_FLOAT16 ? is_nan16(h) : is_nanb16(h);
    return half_value(h, dt == HVDS_BFLOAT16);
  }
  *nan = isnan(v);
  return v;
}

static int same(double got, int got_nan, double want) {
  if (isnan(want)) return got_nan;
  if (got_nan) return 0;
  if (isinf(want)) return got == want;
  return fabs(got - want) <= 1e-3 * fabs(want) + 1e-9 || (fabs(want) > 1e4 && fabs(got - want) <= 0.01 * fabs(want));
}

/* Sum and Average of NaN and Inf follow IEEE arithmetic in every floating dtype; Max and Min
 * keep infinities. */
static void nan_and_inf(void) {
  const int dts[] = {HVDS_FLOAT32, HVDS_FLOAT64, HVDS_FLOAT16, HVDS_BFLOAT16};
  const hvds_reduce_op_t ops[] = {HVDS_SUM, HVDS_AVERAGE, HVDS_MAX, HVDS_MIN};
  for (int d = 0; d < 4; d++)
    for (int k = 0; k < 4; k++) {
      int dt = dts[d];
      double buf[NF];
      for (int e = 0; e < NF; e++) put(buf, dt, e, nf_input(e));
      hvds_tensor_t t = tensor1(buf, (hvds_dtype_t)dt, NF);
      char name[64];
      snprintf(name, sizeof(name), "nan.%s.%d", hvds_dtype_name((hvds_dtype_t)dt), (int)ops[k]);
      hvds_op_options_t o = named(name);
      o.op = ops[k];
      hvds_result_t rc = allreduce_wait(&t, &o);
      if (rc != HVDS_SUCCESS) {
        report(0, name, hvds_result_str(rc));
        continue;
      }
      int wrong = 0;
      for (int e = 0; e < NF; e++) {
        int nan = 0;
        double got = get(buf, dt, e, &nan);
        double want;
        if (ops[k] == HVDS_SUM) {
          want = nf_sum(e, dt);
        } else if (ops[k] == HVDS_AVERAGE) {
          want = nf_sum(e, dt) / size_;
          if (e == 5 && dt == HVDS_FLOAT16 && size_ > 1) continue; /* sum or scale first */
        } else if (e == 0) {
          continue; /* Max and Min of NaN: IEEE has two answers (NaN or the number); either */
        } else if (e == 5 && dt == HVDS_BFLOAT16) {
          continue; /* 60000 is not exact in bfloat16 */
        } else if (ops[k] == HVDS_MAX) {
          want = e == 1 || e == 2 ? INFINITY : e == 3 ? -INFINITY : nf_input(e);
          if (e == 2 && size_ == 1) want = INFINITY;
        } else {
          want = e == 1 ? (size_ > 1 ? 1 : INFINITY) : e == 2 ? (size_ > 1 ? -INFINITY : INFINITY)
                 : e == 3 ? -INFINITY : nf_input(e);
          if (e == 2 && size_ > 2) want = -INFINITY;
        }
        if (!same(got, nan, want)) {
          char detail[160];
          snprintf(detail, sizeof(detail), "element %d is %g%s, expected %g", e, got,
                   nan ? " (NaN)" : "", want);
          report(0, name, detail);
          wrong++;
        }
      }
      if (!wrong) report(1, name, "");
    }
}

/* Zero-size tensors in every collective give empty results; a scalar is one element. */
static void zero_size(void) {
  hvds_handle_t h;
  hvds_tensor_t empty = tensor1(NULL, HVDS_FLOAT32, 0);
  hvds_op_options_t o = named("zero.ar");
  report(allreduce_wait(&empty, &o) == HVDS_SUCCESS, "allreduce of 0 elements", hvds_last_error());
  float keep[5] = {7, 7, 7, 7, 7};
  hvds_tensor_t wide0 = {keep, HVDS_FLOAT32, -1, 2, {0, 5}};
  o = named("zero.ar.2d");
  report(allreduce_wait(&wide0, &o) == HVDS_SUCCESS && keep[0] == 7, "allreduce of shape [0, 5]",
         "failed or wrote");
  float s = 2;
  hvds_tensor_t scalar = {&s, HVDS_FLOAT32, -1, 0, {0}};
  o = named("zero.scalar");
  report(allreduce_wait(&scalar, &o) == HVDS_SUCCESS && s == 2.0f * size_, "allreduce of a scalar",
         "wrong");
  /* Allgather: rank 0 gives no rows, the others one row each. */
  int32_t row[3] = {rank_, rank_, rank_};
  hvds_tensor_t mine = {row, HVDS_INT32, -1, 2, {rank_ == 0 ? 0 : 1, 3}};
  o = named("zero.ag");
  hvds_result_t rc = hvds_allgather_async(&mine, &o, &h);
  if (rc == HVDS_SUCCESS) rc = hvds_wait(h, 60000);
  hvds_tensor_t out = {0};
  if (rc == HVDS_SUCCESS) rc = hvds_handle_output(h, 0, &out);
  report(rc == HVDS_SUCCESS && out.shape[0] == size_ - 1 && out.shape[1] == 3 &&
             (size_ == 1 || ((int32_t*)out.data)[0] == 1),
         "allgather with an empty rank", hvds_result_str(rc));
  hvds_release(h);
  hvds_tensor_t none = {NULL, HVDS_INT32, -1, 2, {0, 3}};
  o = named("zero.ag.all");
  rc = hvds_allgather_async(&none, &o, &h);
  if (rc == HVDS_SUCCESS) rc = hvds_wait(h, 60000);
  if (rc == HVDS_SUCCESS) rc = hvds_handle_output(h, 0, &out);
  report(rc == HVDS_SUCCESS && out.shape[0] == 0, "allgather of nothing", hvds_result_str(rc));
  hvds_release(h);
  o = named("zero.bc");
  rc = hvds_broadcast_async(&empty, &o, &h);
  if (rc == HVDS_SUCCESS) rc = hvds_wait(h, 60000);
  report(rc == HVDS_SUCCESS, "broadcast of 0 elements", hvds_result_str(rc));
  hvds_release(h);
  int32_t zeros[64] = {0};
  o = named("zero.a2a");
  o.splits = zeros;
  o.nsplits = size_;
  rc = hvds_alltoall_async(&none, &o, &h);
  if (rc == HVDS_SUCCESS) rc = hvds_wait(h, 60000);
  if (rc == HVDS_SUCCESS) rc = hvds_handle_output(h, 0, &out);
  report(rc == HVDS_SUCCESS && out.shape[0] == 0, "alltoall of nothing", hvds_result_str(rc));
  hvds_release(h);
  /* Reducescatter of 0 rows, and of one row among size ranks (the others get none). */
  for (int dim0 = 0; dim0 <= 1; dim0++) {
    float r1[4] = {1, 1, 1, 1};
    hvds_tensor_t in = {dim0 ? r1 : NULL, HVDS_FLOAT32, -1, 2, {dim0, 4}};
    o = named(dim0 ? "zero.rs.1" : "zero.rs.0");
    rc = hvds_reducescatter_async(&in, &o, &h);
    if (rc == HVDS_SUCCESS) rc = hvds_wait(h, 60000);
    if (rc == HVDS_SUCCESS) rc = hvds_handle_output(h, 0, &out);
    int want = dim0 == 1 && rank_ == 0 ? 1 : 0;
    report(rc == HVDS_SUCCESS && out.shape[0] == want &&
               (!want || ((float*)out.data)[0] == (float)size_),
           dim0 ? "reducescatter of 1 row" : "reducescatter of 0 rows", hvds_result_str(rc));
    hvds_release(h);
  }
  /* A group with an empty member. */
  float g[2] = {1, 1};
  hvds_tensor_t grp[2] = {tensor1(NULL, HVDS_FLOAT32, 0), tensor1(g, HVDS_FLOAT32, 2)};
  o = named("zero.group");
  rc = hvds_grouped_allreduce_async(2, grp, grp, &o, &h);
  if (rc == HVDS_SUCCESS) rc = hvds_wait(h, 60000);
  report(rc == HVDS_SUCCESS && g[1] == (float)size_, "group with an empty member", hvds_result_str(rc));
  hvds_release(h);
}

/* Names nobody would choose: empty, very long, with quotes and control characters. */
static void odd_names(void) {
  static char longname[5000];
  memset(longname, 'n', sizeof(longname) - 1);
  const char* names[] = {"", longname, "quote\" back\\ newline\n tab\t end"};
  for (int i = 0; i < 3; i++) {
    float v = 1;
    hvds_tensor_t t = tensor1(&v, HVDS_FLOAT32, 1);
    hvds_op_options_t o = named(names[i]);
    hvds_result_t rc = allreduce_wait(&t, &o);
    char what[64];
    snprintf(what, sizeof(what), "name of %zu odd characters", strlen(names[i]));
    /* Either refused with a message or reduced correctly. */
    if (rc == HVDS_SUCCESS)
      report(v == (float)size_, what, "wrong sum");
    else
      expect_error(rc, HVDS_SUCCESS, what);
  }
}

/* The runtime is still usable after all of the above. */
static void still_usable(const char* when) {
  double v[3] = {1, 2, 3};
  hvds_tensor_t t = tensor1(v, HVDS_FLOAT64, 3);
  char name[64];
  snprintf(name, sizeof(name), "usable.%s", when);
  hvds_op_options_t o = named(name);
  hvds_result_t rc = allreduce_wait(&t, &o);
  report(rc == HVDS_SUCCESS && v[2] == 3.0 * size_, name, hvds_result_str(rc));
}

static void bad_process_sets_and_timeline(void) {
  int32_t id = -1;
  int32_t ranks[2] = {0, size_};
  expect_error(hvds_add_process_set(NULL, 1, &id), HVDS_INVALID_ARGUMENT, "process set NULL ranks");
  expect_error(hvds_add_process_set(ranks, 0, &id), HVDS_INVALID_ARGUMENT, "process set of 0");
  expect_error(hvds_add_process_set(ranks, 2, &id), HVDS_INVALID_ARGUMENT, "process set rank = size");
  ranks[1] = -1;
  expect_error(hvds_add_process_set(ranks, 2, &id), HVDS_INVALID_ARGUMENT, "process set rank -1");
  expect_error(hvds_add_process_set(ranks, 1, NULL), HVDS_INVALID_ARGUMENT, "process set NULL id");
  const int32_t bad_ids[] = {0, -1, 999, 100000};
  for (int i = 0; i < 4; i++) {
    char what[64];
    snprintf(what, sizeof(what), "remove process set %d", bad_ids[i]);
    expect_error(hvds_remove_process_set(bad_ids[i]), HVDS_SUCCESS, what);
  }
  expect_error(hvds_start_timeline(NULL, 0), HVDS_SUCCESS, "timeline NULL path");
  expect_error(hvds_start_timeline("", 0), HVDS_SUCCESS, "timeline empty path");
  /* A directory is refused on rank 0's coordinator thread, with a warning in the log. */
  hvds_start_timeline("/", 0);
  still_usable("timeline on a directory");
  hvds_stop_timeline();
  hvds_stop_timeline();
  report(1, "timeline stopped twice", "");
}

static void after_shutdown(void) {
  report(hvds_shutdown() == HVDS_SUCCESS, "second shutdown", "failed");
  float x = 1;
  hvds_tensor_t t = tensor1(&x, HVDS_FLOAT32, 1);
  hvds_op_options_t o = named("after.shutdown");
  hvds_handle_t h;
  expect_error(hvds_allreduce_async(&t, &t, &o, &h), HVDS_SUCCESS, "allreduce after shutdown");
  report(hvds_rank() == -1, "rank is -1 after shutdown", "not -1");
}

int main(void) {
  before_init();
  hvds_result_t rc = hvds_init();
  if (rc != HVDS_SUCCESS) {
    printf("MISUSE FAIL init: %s\n", hvds_last_error());
    return 1;
  }
  report(hvds_init() == HVDS_SUCCESS, "second init is harmless", hvds_last_error());
  rank_ = hvds_rank();
  size_ = hvds_size();
  bad_arguments();
  bad_handles();
  still_usable("arguments");
  handle_edges();
  bad_collective_arguments();
  still_usable("collective arguments");
  zero_size();
  nan_and_inf();
  odd_names();
  bad_process_sets_and_timeline();
  still_usable("end");
  rc = hvds_shutdown();
  report(rc == HVDS_SUCCESS, "shutdown", hvds_last_error());
  int r = rank_, n = size_;
  after_shutdown();
  if (failures_ == 0) printf("PASS misuse rank %d of %d\n", r, n);
  return failures_ ? 1 : 0;
}
