/* Sparse allreduce test worker, the runtime scenarios: sparse_detect against the plain dense
 * allreduce, process sets, join, the timeline, the network measured at init. */
#include <math.h>
#include <string.h>

#include "sparse_rt.h"
#include "sparse_worker.h"

/* ---- sparse_detect ---- */

static uint64_t mix(uint64_t x) {
  x = (x ^ (x >> 33)) * 0xff51afd7ed558ccdULL;
  x = (x ^ (x >> 33)) * 0xc4ceb9fe1a85ec53ULL;
  return x ^ (x >> 33);
}

/* A dense tensor of rows x cols with about pct % of its rows non-zero (every row when pct is
 * 100), different on every rank; small integer values. */
static void* mostly_zero(hvds_dtype_t dt, int64_t rows, int64_t cols, int pct, int salt) {
  size_t esz = hvds_dtype_size(dt);
  void* p = calloc((size_t)(rows * cols), esz);
  for (int64_t i = 0; i < rows; i++) {
    uint64_t h = mix((uint64_t)i * 131 + (uint64_t)rank_ * 7 + (uint64_t)salt);
    if ((int)(h % 100) >= pct) continue;
    for (int64_t c = 0; c < cols; c++)
      set_el(p, dt, (size_t)(i * cols + c), (double)((h >> 8) % 4 + 1 + c % 3));
  }
  return p;
}

typedef struct {
  const char* name;
  hvds_dtype_t dtype;
  int32_t ndim;
  int64_t rows, cols;
  int pct;
  hvds_reduce_op_t op;
  double prescale, postscale;
  const char* algo; /* forced, or NULL */
  int want_detect;  /* the tensor is large enough */
  int want_sparse;  /* at np >= 2 the model must pick a sparse algorithm (1), dense (0), or -1 */
} detect_case_t;

/* One tensor allreduced with sparse_detect and without; both results must agree. */
static void detect_one(const detect_case_t* c, int use_env_default) {
  int64_t n = c->rows * c->cols;
  size_t bytes = (size_t)n * hvds_dtype_size(c->dtype);
  void* a = mostly_zero(c->dtype, c->rows, c->cols, c->pct, (int)strlen(c->name));
  void* b = malloc(bytes);
  memcpy(b, a, bytes);
  hvds_tensor_t ta = {a, c->dtype, -1, c->ndim, {c->ndim == 1 ? n : c->rows, c->cols}};
  hvds_tensor_t tb = ta;
  tb.data = b;
  hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
  char name[96];
  snprintf(name, sizeof name, "detect.%s", c->name);
  o.name = name;
  o.op = c->op;
  o.prescale = c->prescale;
  o.postscale = c->postscale;
  o.sparse_algorithm = c->algo;
  o.sparse_detect = use_env_default ? -1 : 1;
  hvds_handle_t ha, hb;
  CHECK_OK(hvds_allreduce_async(&ta, &ta, &o, &ha));
  snprintf(name, sizeof name, "plain.%s", c->name);
  o.sparse_detect = 0;
  o.sparse_algorithm = NULL;
  CHECK_OK(hvds_allreduce_async(&tb, &tb, &o, &hb));
  wait_ok(ha, c->name);
  wait_ok(hb, c->name);
  for (int64_t i = 0; i < n; i++)
    check_close(get_el(a, c->dtype, (size_t)i), get_el(b, c->dtype, (size_t)i), c->dtype, c->name,
                (size_t)i);
  hvds_sparse_stats_t st;
  hvds_result_t rc = hvds__handle_sparse_stats(ha, &st);
  if (!c->want_detect) {
    if (rc != HVDS_INVALID_ARGUMENT) FAIL("%s: a small tensor ran sparse_detect", c->name);
  } else {
    if (rc != HVDS_SUCCESS || !st.detect) FAIL("%s: no sparse_detect statistics", c->name);
    if (c->algo && strcmp(st.algorithm_name, c->algo) != 0)
      FAIL("%s: ran %s, forced %s", c->name, st.algorithm_name, c->algo);
    // At np 2 the allgather of two full tensors is the dense exchange with one message less,
    // so the model rightly prefers it: expect dense from np 3.
    int judge = c->want_sparse > 0 ? size_ >= 2 : c->want_sparse == 0 && size_ >= 3;
    if (!c->algo && judge && (st.algorithm != 1) != c->want_sparse)
      FAIL("%s: ran %s at density %g", c->name, st.algorithm_name, st.density);
    printf("rank %d %s: %s, density %.4f, predicted %.3f ms, took %.3f ms\n", rank_, c->name,
           st.algorithm_name, st.density, st.predicted_s * 1e3, st.measured_s * 1e3);
  }
  if (hvds__handle_sparse_stats(hb, &st) != HVDS_INVALID_ARGUMENT) FAIL("plain ran detect");
  hvds_release(ha);
  hvds_release(hb);
  free(a);
  free(b);
}

void scenario_detect(int use_env_default) {
  static const detect_case_t cases[] = {
      {"vec1pct", HVDS_FLOAT32, 1, 65536, 1, 1, HVDS_SUM, 1, 1, NULL, 1, 1},
      {"rows1pct", HVDS_FLOAT32, 2, 4096, 16, 1, HVDS_SUM, 1, 1, NULL, 1, 1},
      {"rows5pct.avg", HVDS_FLOAT64, 2, 8192, 8, 5, HVDS_AVERAGE, 2.0, 0.5, NULL, 1, 1},
      {"dense", HVDS_FLOAT32, 1, 65536, 1, 100, HVDS_SUM, 1, 1, NULL, 1, 0},
      {"zen", HVDS_FLOAT32, 2, 4096, 16, 3, HVDS_SUM, 1, 1, "zen", 1, -1},
      {"dense.forced", HVDS_FLOAT32, 1, 65536, 1, 1, HVDS_AVERAGE, 1, 1, "dense", 1, -1},
      {"int32", HVDS_INT32, 1, 65536, 1, 2, HVDS_SUM, 1, 1, NULL, 1, -1},
      {"small", HVDS_FLOAT32, 1, 100, 1, 10, HVDS_SUM, 1, 1, NULL, 0, -1},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
    detect_one(&cases[k], use_env_default);
}

/* ---- process sets and join ---- */

static void run_checked(const layout_t* l, const char* name, uint64_t seed, const char* algo,
                        int dense_out, hvds_reduce_op_t op, int32_t set, const int* member) {
  entries_t e;
  gen_entries(l, seed, rank_, 0, &e);
  hvds_sparse_tensor_t t = sparse_view(l, &e);
  size_t numel = (size_t)lay_numel(l);
  void* out = dense_out ? malloc(numel * hvds_dtype_size(l->dtype) + 1) : NULL;
  hvds_tensor_t to = {out, l->dtype, -1, l->ndim, {0}};
  memcpy(to.shape, l->shape, sizeof to.shape);
  hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
  o.name = name;
  o.op = op;
  o.process_set = set;
  o.sparse_algorithm = algo;
  hvds_handle_t h;
  CHECK_OK(hvds_sparse_allreduce_async(&t, dense_out ? &to : NULL, &o, &h));
  wait_ok(h, name);
  unsigned char* hit;
  double* want = expected_sum(l, seed, 0, member, &hit);
  if (op == HVDS_AVERAGE) {
    int n = set == 0 ? size_ : hvds_process_set_size(set);
    for (size_t i = 0; i < numel; i++) want[i] /= n;
  }
  check_result(l, h, out, want, hit, name);
  hvds_release(h);
  free(want);
  free(hit);
  free(out);
  free_entries(&e);
}

void scenario_process_sets(void) {
  if (size_ < 2) {
    printf("note: process_sets need np >= 2\n");
    return;
  }
  int32_t ranks[2] = {0, size_ - 1};
  int32_t id;
  CHECK_OK(hvds_add_process_set(ranks, 2, &id));
  int* member = calloc((size_t)size_, sizeof(int));
  member[0] = member[size_ - 1] = 1;
  layout_t coo = {HVDS_SPARSE_COO, HVDS_INT32, HVDS_FLOAT32, 1, {5000}};
  layout_t rows = {HVDS_SPARSE_ROWS, HVDS_INT64, HVDS_FLOAT64, 2, {400, 8}};
  if (member[rank_]) {
    run_checked(&coo, "ps.coo", 11, NULL, 0, HVDS_SUM, id, member);
    run_checked(&rows, "ps.rows.zen", 12, "zen", 1, HVDS_AVERAGE, id, member);
    run_checked(&coo, "ps.coo.ssar", 13, "ssar_split_allgather", 0, HVDS_SUM, id, member);
  } else {
    hvds_sparse_tensor_t t = {
        HVDS_SPARSE_COO, NULL, HVDS_INT32, NULL, HVDS_FLOAT32, 0, 1, {10}, -1};
    hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
    o.name = "ps.coo";
    o.process_set = id;
    hvds_handle_t h;
    if (hvds_sparse_allreduce_async(&t, NULL, &o, &h) != HVDS_INVALID_ARGUMENT ||
        !strstr(hvds_last_error(), "is not a member"))
      FAIL("a non-member was not refused: %s", hvds_last_error());
  }
  // The global set alongside.
  run_checked(&coo, "global.coo", 14, "zen", 0, HVDS_SUM, 0, NULL);
  hvds_handle_t h;
  CHECK_OK(hvds_barrier_async(0, &h));
  wait_ok(h, "barrier");
  hvds_release(h);
  if (id != 0) CHECK_OK(hvds_remove_process_set(id));
  free(member);
}

/* The last rank joins at once; the others' sparse allreduces go on without its entries. */
void scenario_join(void) {
  if (size_ < 2) {
    printf("note: join needs np >= 2\n");
    return;
  }
  int* member = calloc((size_t)size_, sizeof(int));
  for (int r = 0; r < size_ - 1; r++) member[r] = 1;
  if (rank_ != size_ - 1) {
    layout_t coo = {HVDS_SPARSE_COO, HVDS_INT64, HVDS_FLOAT32, 1, {3000}};
    layout_t rows = {HVDS_SPARSE_ROWS, HVDS_INT32, HVDS_FLOAT32, 2, {200, 4}};
    run_checked(&coo, "join.coo", 21, NULL, 0, HVDS_SUM, 0, member);
    run_checked(&rows, "join.rows.zen", 22, "zen", 1, HVDS_SUM, 0, member);
    run_checked(&coo, "join.coo.avg", 23, "allgather", 0, HVDS_AVERAGE, 0, member);
    run_checked(&rows, "join.rows.dense", 24, "dense", 0, HVDS_SUM, 0, member);
  }
  hvds_handle_t h;
  CHECK_OK(hvds_join_async(&h));
  wait_ok(h, "join");
  hvds_release(h);
  free(member);
}

/* ---- timeline and network ---- */

void scenario_timeline(void) {
  layout_t coo = {HVDS_SPARSE_COO, HVDS_INT32, HVDS_FLOAT32, 1, {20000}};
  layout_t rows = {HVDS_SPARSE_ROWS, HVDS_INT64, HVDS_FLOAT32, 2, {1000, 8}};
  run_checked(&coo, "tl.zen", 31, "zen", 0, HVDS_SUM, 0, NULL);
  run_checked(&rows, "tl.auto", 32, NULL, 1, HVDS_SUM, 0, NULL);
  static const detect_case_t c = {"tl", HVDS_FLOAT32, 1, 65536, 1, 1, HVDS_SUM, 1, 1, NULL, 1, -1};
  detect_one(&c, 0);
}

/* Every rank prints the network its cost model used; the test compares the lines. */
void scenario_net(void) {
  layout_t coo = {HVDS_SPARSE_COO, HVDS_INT32, HVDS_FLOAT32, 1, {1000}};
  entries_t e;
  gen_entries(&coo, 41, rank_, 0, &e);
  hvds_sparse_tensor_t t = sparse_view(&coo, &e);
  hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
  o.name = "net";
  hvds_handle_t h;
  CHECK_OK(hvds_sparse_allreduce_async(&t, NULL, &o, &h));
  wait_ok(h, "net");
  hvds_sparse_stats_t st;
  CHECK_OK(hvds__handle_sparse_stats(h, &st));
  if (!(st.alpha > 0 && st.beta > 0 && isfinite(st.alpha) && isfinite(st.beta)))
    FAIL("network alpha %g beta %g", st.alpha, st.beta);
  printf("NET alpha=%a beta=%a\n", st.alpha, st.beta);
  printf("rank %d: alpha %.2f us, %.3f GB/s\n", rank_, st.alpha * 1e6, 1e-9 / st.beta);
  hvds_release(h);
  free_entries(&e);
}
