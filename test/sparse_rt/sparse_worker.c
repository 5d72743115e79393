/* Sparse allreduce test worker: data generation, checks, and the scenarios on the sparse API
 * itself (every format, index type, output kind, op and algorithm; the allocator; errors). The
 * runtime scenarios (sparse_detect, process sets, join, timeline, network) are in
 * sparse_worker_more.c, the overlap learned across steps in sparse_worker_overlap.c. Prints
 * "PASS <scenario>" on success, exits non-zero otherwise. */
#include "sparse_worker.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "sparse_rt.h"

int rank_, size_;

static const char* const kAlgos[] = {"auto",
                                     "dense",
                                     "allgather",
                                     "ssar_recursive_doubling",
                                     "ssar_split_allgather",
                                     "dsar_split_allgather",
                                     "zen"};
#define NUM_ALGOS 7

/* ---- data ---- */

int64_t lay_numel(const layout_t* l) {
  int64_t n = 1;
  for (int32_t d = 0; d < l->ndim; d++) n *= l->shape[d];
  return n;
}
int64_t lay_dim(const layout_t* l) {
  return l->format == HVDS_SPARSE_ROWS ? l->shape[0] : lay_numel(l);
}
int64_t lay_row(const layout_t* l) {
  if (l->format != HVDS_SPARSE_ROWS) return 1;
  int64_t n = 1;
  for (int32_t d = 1; d < l->ndim; d++) n *= l->shape[d];
  return n;
}

static uint64_t next_rand(uint64_t* s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double get_el(const void* p, hvds_dtype_t dt, size_t i) {
  switch (dt) {
    case HVDS_INT32:
      return ((const int32_t*)p)[i];
    case HVDS_INT64:
      return (double)((const int64_t*)p)[i];
    case HVDS_FLOAT32:
      return ((const float*)p)[i];
    case HVDS_FLOAT64:
      return ((const double*)p)[i];
    default:
      return NAN;
  }
}

void set_el(void* p, hvds_dtype_t dt, size_t i, double v) {
  switch (dt) {
    case HVDS_INT32:
      ((int32_t*)p)[i] = (int32_t)v;
      break;
    case HVDS_INT64:
      ((int64_t*)p)[i] = (int64_t)v;
      break;
    case HVDS_FLOAT32:
      ((float*)p)[i] = (float)v;
      break;
    case HVDS_FLOAT64:
      ((double*)p)[i] = v;
      break;
    default:
      break;
  }
}

int64_t get_idx(const void* p, hvds_dtype_t dt, size_t i) {
  return dt == HVDS_INT32 ? ((const int32_t*)p)[i] : ((const int64_t*)p)[i];
}

void gen_entries(const layout_t* l, uint64_t seed, int r, int dense, entries_t* out) {
  uint64_t s = seed * 1000003ULL + (uint64_t)r * 7919ULL + 1;
  int64_t dim = lay_dim(l), row = lay_row(l);
  int64_t nnz = dim == 0 ? 0
                : dense  ? 2 * dim
                         : (int64_t)(next_rand(&s) % (uint64_t)(dim / 16 + 3));
  size_t isz = hvds_dtype_size(l->index_dtype), esz = hvds_dtype_size(l->dtype);
  out->nnz = nnz;
  out->indices = malloc((size_t)nnz * isz + 1);
  out->values = malloc((size_t)(nnz * row) * esz + 1);
  for (int64_t i = 0; i < nnz; i++) {
    int64_t idx = (int64_t)(next_rand(&s) % (uint64_t)dim);
    if (l->index_dtype == HVDS_INT32)
      ((int32_t*)out->indices)[i] = (int32_t)idx;
    else
      ((int64_t*)out->indices)[i] = idx;
    for (int64_t k = 0; k < row; k++)
      set_el(out->values, l->dtype, (size_t)(i * row + k), (double)(next_rand(&s) % 4 + 1));
  }
}

void free_entries(entries_t* e) {
  free(e->indices);
  free(e->values);
  e->indices = e->values = NULL;
}

double* expected_sum(const layout_t* l, uint64_t seed, int dense, const int* member,
                     unsigned char** hit) {
  int64_t dim = lay_dim(l), row = lay_row(l);
  double* want = calloc((size_t)(dim * row) + 1, sizeof(double));
  *hit = calloc((size_t)dim + 1, 1);
  for (int r = 0; r < size_; r++) {
    if (member != NULL && !member[r]) continue;
    entries_t e;
    gen_entries(l, seed, r, dense, &e);
    for (int64_t i = 0; i < e.nnz; i++) {
      int64_t idx = get_idx(e.indices, l->index_dtype, (size_t)i);
      (*hit)[idx] = 1;
      for (int64_t k = 0; k < row; k++)
        want[idx * row + k] += get_el(e.values, l->dtype, (size_t)(i * row + k));
    }
    free_entries(&e);
  }
  return want;
}

hvds_sparse_tensor_t sparse_view(const layout_t* l, const entries_t* e) {
  hvds_sparse_tensor_t t;
  memset(&t, 0, sizeof t);
  t.format = l->format;
  t.indices = e->indices;
  t.index_dtype = l->index_dtype;
  t.values = e->values;
  t.dtype = l->dtype;
  t.nnz = e->nnz;
  t.dense_ndim = l->ndim;
  memcpy(t.dense_shape, l->shape, sizeof t.dense_shape);
  t.device = -1;
  return t;
}

/* ---- checks ---- */

void check_close(double got, double want, hvds_dtype_t dt, const char* what, size_t i) {
  int exact = dt == HVDS_INT32 || dt == HVDS_INT64;
  double tol = exact ? 0 : 1e-5 * fabs(want) + 1e-6;
  if (!(fabs(got - want) <= tol)) FAIL("%s: element %zu is %g, expected %g", what, i, got, want);
}

void wait_ok(hvds_handle_t h, const char* what) {
  hvds_result_t rc = hvds_wait(h, 60000);
  if (rc != HVDS_SUCCESS) FAIL("%s: %s: %s", what, hvds_result_str(rc), hvds_handle_error(h));
}

void wait_fails(hvds_handle_t h, hvds_result_t rc, const char* what, const char* needle1,
                const char* needle2) {
  hvds_result_t got = hvds_wait(h, 60000);
  const char* msg = hvds_handle_error(h);
  if (got != rc)
    FAIL("%s: %s (%s), expected %s", what, hvds_result_str(got), msg, hvds_result_str(rc));
  if (needle1 && !strstr(msg, needle1)) FAIL("%s: message lacks '%s': %s", what, needle1, msg);
  if (needle2 && !strstr(msg, needle2)) FAIL("%s: message lacks '%s': %s", what, needle2, msg);
  printf("rank %d %s: %s\n", rank_, what, msg);
}

void check_result(const layout_t* l, hvds_handle_t h, const void* dense_out, const double* want,
                  const unsigned char* hit, const char* what) {
  int64_t dim = lay_dim(l), row = lay_row(l);
  if (dense_out != NULL) {
    for (int64_t i = 0; i < dim * row; i++)
      check_close(get_el(dense_out, l->dtype, (size_t)i), want[i], l->dtype, what, (size_t)i);
    return;
  }
  int64_t nnz = -1;
  const void *idx = NULL, *val = NULL;
  int32_t is_dense = -1;
  const char* algo = NULL;
  CHECK_OK(hvds_handle_sparse_result(h, &nnz, &idx, &val, &is_dense, &algo));
  if (algo == NULL || !*algo) FAIL("%s: no algorithm name", what);
  if (is_dense) {
    if (idx != NULL || nnz != dim) FAIL("%s: dense result with %lld entries", what, (long long)nnz);
    for (int64_t i = 0; i < dim * row; i++)
      check_close(get_el(val, l->dtype, (size_t)i), want[i], l->dtype, what, (size_t)i);
    return;
  }
  int64_t union_size = 0;
  for (int64_t i = 0; i < dim; i++) union_size += hit[i];
  if (nnz != union_size)
    FAIL("%s: %lld entries, expected %lld", what, (long long)nnz, (long long)union_size);
  for (int64_t k = 0; k < nnz; k++) {
    int64_t i = get_idx(idx, l->index_dtype, (size_t)k);
    if (i < 0 || i >= dim || !hit[i] || (k > 0 && i <= get_idx(idx, l->index_dtype, (size_t)k - 1)))
      FAIL("%s: entry %lld has index %lld", what, (long long)k, (long long)i);
    for (int64_t c = 0; c < row; c++)
      check_close(get_el(val, l->dtype, (size_t)(k * row + c)), want[i * row + c], l->dtype, what,
                  (size_t)(i * row + c));
  }
}

/* ---- scenarios on the API ---- */

typedef struct {
  layout_t lay;
  int dense_data, dense_out, algo;
  hvds_reduce_op_t op;
  double prescale, postscale; /* 0: 1 */
  uint64_t seed;
  entries_t mine;
  void* out;
  hvds_handle_t h;
  char name[96];
} job_t;

static void job_start(job_t* j) {
  gen_entries(&j->lay, j->seed, rank_, j->dense_data, &j->mine);
  hvds_sparse_tensor_t t = sparse_view(&j->lay, &j->mine);
  hvds_tensor_t out = {NULL, j->lay.dtype, -1, j->lay.ndim, {0}};
  memcpy(out.shape, j->lay.shape, sizeof out.shape);
  j->out = NULL;
  if (j->dense_out)
    out.data = j->out = malloc((size_t)lay_numel(&j->lay) * hvds_dtype_size(j->lay.dtype) + 1);
  hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
  o.name = j->name;
  o.op = j->op;
  if (j->prescale != 0) o.prescale = j->prescale;
  if (j->postscale != 0) o.postscale = j->postscale;
  o.sparse_algorithm = kAlgos[j->algo];
  CHECK_OK(hvds_sparse_allreduce_async(&t, j->dense_out ? &out : NULL, &o, &j->h));
}

static void job_finish(job_t* j) {
  wait_ok(j->h, j->name);
  unsigned char* hit;
  double* want = expected_sum(&j->lay, j->seed, j->dense_data, NULL, &hit);
  double factor = (j->op == HVDS_AVERAGE ? 1.0 / size_ : 1.0) *
                  (j->prescale != 0 ? j->prescale : 1) * (j->postscale != 0 ? j->postscale : 1);
  for (int64_t i = 0; i < lay_numel(&j->lay); i++) want[i] *= factor;
  check_result(&j->lay, j->h, j->out, want, hit, j->name);
  const char* algo = NULL;
  CHECK_OK(hvds_handle_sparse_result(j->h, NULL, NULL, NULL, NULL, &algo));
  if (j->algo != 0 && strcmp(algo, kAlgos[j->algo]) != 0)
    FAIL("%s: ran %s, forced %s", j->name, algo, kAlgos[j->algo]);
  hvds_release(j->h);
  free(want);
  free(hit);
  free(j->out);
  free_entries(&j->mine);
}

/* Every format x index type x output x op x density, each with every algorithm in flight at
 * once (seven tensors negotiated together, never fused). */
static void scenario_basic(void) {
  static const layout_t lays[] = {
      {HVDS_SPARSE_COO, HVDS_INT32, HVDS_FLOAT32, 1, {1000}},
      {HVDS_SPARSE_COO, HVDS_INT64, HVDS_FLOAT64, 2, {20, 30}},
      {HVDS_SPARSE_ROWS, HVDS_INT32, HVDS_FLOAT32, 3, {300, 2, 3}},
      {HVDS_SPARSE_ROWS, HVDS_INT64, HVDS_INT32, 2, {257, 4}},
  };
  job_t jobs[NUM_ALGOS];
  int cases = 0;
  for (int li = 0; li < 4; li++)
    for (int dense_out = 0; dense_out <= 1; dense_out++)
      for (int op = 0; op <= 1; op++)
        for (int dense_data = 0; dense_data <= 1; dense_data++) {
          if (op == 1 && lays[li].dtype == HVDS_INT32) continue;  // integer averages truncate
          for (int a = 0; a < NUM_ALGOS; a++) {
            job_t* j = &jobs[a];
            memset(j, 0, sizeof *j);
            j->lay = lays[li];
            j->dense_data = dense_data;
            j->dense_out = dense_out;
            j->algo = a;
            j->op = op ? HVDS_AVERAGE : HVDS_SUM;
            j->seed = (uint64_t)(cases * 16 + a + 1);
            snprintf(j->name, sizeof j->name, "basic.%d.%d.%d.%d.%s", li, dense_out, op, dense_data,
                     kAlgos[a]);
            job_start(j);
          }
          for (int a = 0; a < NUM_ALGOS; a++) job_finish(&jobs[a]);
          cases++;
        }
  // prescale and postscale multiply the result, sparse or dense.
  for (int k = 0; k < 4; k++) {
    job_t j;
    memset(&j, 0, sizeof j);
    j.lay = lays[k];
    j.algo = 6 - k;
    j.op = k % 2 ? HVDS_AVERAGE : HVDS_SUM;
    j.dense_out = k >= 2;
    j.prescale = 3;
    j.postscale = 0.5;
    if (j.lay.dtype == HVDS_INT32) {  // integers: an exact factor
      j.op = HVDS_SUM;
      j.postscale = 1;
    }
    snprintf(j.name, sizeof j.name, "scaled.%d", k);
    job_start(&j);
    job_finish(&j);
  }
  // No entries anywhere, and an empty dense shape.
  static const layout_t empty[] = {{HVDS_SPARSE_COO, HVDS_INT32, HVDS_FLOAT32, 1, {0}},
                                   {HVDS_SPARSE_ROWS, HVDS_INT64, HVDS_FLOAT32, 2, {0, 5}}};
  for (int k = 0; k < 2; k++)
    for (int a = 0; a < NUM_ALGOS; a++) {
      job_t j;
      memset(&j, 0, sizeof j);
      j.lay = empty[k];
      j.algo = a;
      j.op = HVDS_SUM;
      j.dense_out = a % 2;
      snprintf(j.name, sizeof j.name, "empty.%d.%s", k, kAlgos[a]);
      job_start(&j);
      job_finish(&j);
    }
}

/* The allocator: indices then values for a sparse result, values only for a dense one. */
typedef struct {
  int calls;
  hvds_dtype_t dtype[3];
  int32_t ndim[3];
  int64_t shape0[3];
  void* mem[3];
} alloc_log_t;

static void* log_alloc(void* ctx, hvds_dtype_t dtype, int32_t ndim, const int64_t* shape,
                       size_t bytes) {
  alloc_log_t* a = ctx;
  if (a->calls >= 3) FAIL("allocator called %d times", a->calls + 1);
  a->dtype[a->calls] = dtype;
  a->ndim[a->calls] = ndim;
  a->shape0[a->calls] = ndim > 0 ? shape[0] : -1;
  return a->mem[a->calls++] = malloc(bytes + 1);
}

static void scenario_alloc(void) {
  for (int dense_data = 0; dense_data <= 1; dense_data++) {
    layout_t l = {HVDS_SPARSE_ROWS, HVDS_INT64, HVDS_FLOAT32, 2, {64, 3}};
    entries_t e;
    gen_entries(&l, 99 + dense_data, rank_, dense_data, &e);
    hvds_sparse_tensor_t t = sparse_view(&l, &e);
    alloc_log_t log;
    memset(&log, 0, sizeof log);
    hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
    o.name = dense_data ? "alloc.dense" : "alloc.sparse";
    o.alloc = log_alloc;
    o.alloc_ctx = &log;
    hvds_handle_t h;
    CHECK_OK(hvds_sparse_allreduce_async(&t, NULL, &o, &h));
    wait_ok(h, o.name);
    int64_t nnz;
    const void *idx, *val;
    int32_t is_dense;
    CHECK_OK(hvds_handle_sparse_result(h, &nnz, &idx, &val, &is_dense, NULL));
    if (is_dense != dense_data) FAIL("%s: is_dense %d", o.name, is_dense);
    if (is_dense ? (log.calls != 1 || val != log.mem[0] || log.ndim[0] != 2 || log.shape0[0] != 64)
                 : (log.calls != 2 || idx != log.mem[0] || val != log.mem[1] ||
                    log.dtype[0] != HVDS_INT64 || log.dtype[1] != HVDS_FLOAT32 ||
                    log.shape0[0] != nnz || log.shape0[1] != nnz || log.ndim[1] != 2))
      FAIL("%s: allocator calls %d, dtypes %d %d, first dims %lld %lld", o.name, log.calls,
           log.dtype[0], log.dtype[1], (long long)log.shape0[0], (long long)log.shape0[1]);
    unsigned char* hit;
    double* want = expected_sum(&l, 99 + dense_data, dense_data, NULL, &hit);
    check_result(&l, h, NULL, want, hit, o.name);
    hvds_release(h);  // the memory is ours: still readable
    if (nnz > 0 && get_el(val, HVDS_FLOAT32, 0) == 0) FAIL("allocator memory cleared");
    for (int k = 0; k < log.calls; k++) free(log.mem[k]);
    free(want);
    free(hit);
    free_entries(&e);
  }
}

/* sparse_quant_bits of the next start_small() calls. */
static int32_t small_quant_bits_ = 0;

/* Starts a sparse allreduce of a tiny COO tensor with the given tweaks. */
static hvds_handle_t start_small(const char* name, layout_t l, const char* algo,
                                 hvds_reduce_op_t op, int64_t bad_index) {
  static int64_t idx64[2];
  static int32_t idx32[2];
  static double vals[16];
  for (int k = 0; k < 16; k++) vals[k] = 1;
  idx64[0] = idx32[0] = 1;
  idx64[1] = idx32[1] = (int32_t)bad_index;
  hvds_sparse_tensor_t t = {l.format,
                            l.index_dtype == HVDS_INT32 ? (void*)idx32 : (void*)idx64,
                            l.index_dtype,
                            vals,
                            l.dtype,
                            bad_index >= 0 || bad_index < -1 ? 2 : 1,
                            l.ndim,
                            {0},
                            -1};
  memcpy(t.dense_shape, l.shape, sizeof t.dense_shape);
  hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
  o.name = name;
  o.op = op;
  o.sparse_algorithm = algo;
  o.sparse_quant_bits = small_quant_bits_;
  hvds_handle_t h;
  CHECK_OK(hvds_sparse_allreduce_async(&t, NULL, &o, &h));
  return h;
}

/* One disagreement: the last rank's tensor differs from the others' in one respect. */
typedef struct {
  const char* name;
  const char* text; /* expected in the message */
  int what;         /* 0 shape, 1 dtype, 2 index type, 3 format, 4 algorithm, 5 op,
                       6 quantization */
} mismatch_t;

/* Disagreements fail every rank with Horovod's text, naming the tensor and the ranks. */
static void errors_mismatch(void) {
  static const mismatch_t cases[] = {
      {"err.shape", "Mismatched SPARSE_ALLREDUCE tensor shapes", 0},
      {"err.dtype", "Mismatched data types", 1},
      {"err.index", "Mismatched sparse index types", 2},
      {"err.format", "Mismatched sparse formats", 3},
      {"err.algo", "Mismatched sparse allreduce algorithms", 4},
      {"err.op", "Mismatched reduction operation", 5},
      {"err.quant", "Mismatched sparse quantization: One rank asked for", 6},
  };
  int odd = rank_ == size_ - 1 && size_ > 1;
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    const mismatch_t* c = &cases[k];
    layout_t l = {HVDS_SPARSE_COO, HVDS_INT32, HVDS_FLOAT64, 1, {100}};
    if (c->what == 3) l = (layout_t){HVDS_SPARSE_COO, HVDS_INT32, HVDS_FLOAT64, 2, {10, 10}};
    if (odd && c->what == 0) l.shape[0] = 101;
    if (odd && c->what == 1) l.dtype = HVDS_FLOAT32;
    if (odd && c->what == 2) l.index_dtype = HVDS_INT64;
    if (odd && c->what == 3) l.format = HVDS_SPARSE_ROWS;
    const char* algo = c->what == 4 ? (odd ? "zen" : "allgather") : NULL;
    hvds_reduce_op_t op = odd && c->what == 5 ? HVDS_AVERAGE : HVDS_SUM;
    small_quant_bits_ = c->what == 6 ? (odd ? 8 : 4) : 0;
    hvds_handle_t h = start_small(c->name, l, algo, op, -1);
    small_quant_bits_ = 0;
    char where[64];
    snprintf(where, sizeof where, "[tensor: %s; ranks 0 and %d]", c->name, size_ - 1);
    if (size_ > 1)
      wait_fails(h, HVDS_PRECONDITION_ERROR, c->name, c->text, where);
    else
      wait_ok(h, c->name);
    hvds_release(h);
  }
}

/* Indices outside the dense shape on one rank fail every rank, with every algorithm. */
static void errors_bad_index(void) {
  const layout_t base = {HVDS_SPARSE_COO, HVDS_INT32, HVDS_FLOAT64, 1, {100}};
  hvds_handle_t h;
  for (int a = 0; a < NUM_ALGOS; a++) {
    char name[64];
    snprintf(name, sizeof name, "err.bad.%s", kAlgos[a]);
    h = start_small(name, base, kAlgos[a], HVDS_SUM, rank_ == size_ - 1 ? 100 : 5);
    wait_fails(h, HVDS_INVALID_ARGUMENT, name, "outside the dense shape", "[tensor: err.bad.");
    hvds_release(h);
  }
  layout_t rows = {HVDS_SPARSE_ROWS, HVDS_INT64, HVDS_FLOAT64, 2, {8, 2}};
  h = start_small("err.badrow", rows, NULL, HVDS_SUM, rank_ == 0 ? -3 : 2);
  wait_fails(h, HVDS_INVALID_ARGUMENT, "badrow", "outside the dense shape", "[tensor: err.badrow]");
  hvds_release(h);
  h = start_small("err.after", base, NULL, HVDS_SUM, -1);
  wait_ok(h, "after errors");
  hvds_release(h);
}

/* Local misuse is refused at the call; an old caller's options (version 1 size) work, and the
 * fields beyond its size are never read. */
static void errors_local(void) {
  hvds_sparse_tensor_t t = {HVDS_SPARSE_COO, NULL, HVDS_INT32, NULL, HVDS_FLOAT32, 0, 1, {4}, -1};
  hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
  hvds_handle_t h;
  o.name = "err.local";
  o.sparse_algorithm = "fastest";
  if (hvds_sparse_allreduce_async(&t, NULL, &o, &h) != HVDS_INVALID_ARGUMENT ||
      !strstr(hvds_last_error(), "unknown algorithm"))
    FAIL("unknown algorithm accepted: %s", hvds_last_error());
  o.sparse_algorithm = NULL;
  o.sparse_quant_bits = 3;
  if (hvds_sparse_allreduce_async(&t, NULL, &o, &h) != HVDS_INVALID_ARGUMENT ||
      !strstr(hvds_last_error(), "sparse_quant_bits must be 0, 2, 4 or 8, not 3"))
    FAIL("quant_bits 3 accepted: %s", hvds_last_error());
  o.sparse_quant_bits = 0;
  o.op = HVDS_MAX;
  if (hvds_sparse_allreduce_async(&t, NULL, &o, &h) != HVDS_NOT_SUPPORTED) FAIL("Max accepted");
  o.op = HVDS_SUM;
  t.index_dtype = HVDS_FLOAT32;
  if (hvds_sparse_allreduce_async(&t, NULL, &o, &h) != HVDS_INVALID_ARGUMENT) FAIL("float indices");
  t.index_dtype = HVDS_INT32;
  t.nnz = 3;
  if (hvds_sparse_allreduce_async(&t, NULL, &o, &h) != HVDS_INVALID_ARGUMENT) FAIL("NULL entries");
  hvds_op_options_t v1 = HVDS_OP_OPTIONS_INIT;
  v1.size = offsetof(hvds_op_options_t, sparse_algorithm);
  v1.version = 1;
  v1.sparse_algorithm = "bogus";
  v1.sparse_detect = 1;
  v1.name = "v1.sparse";
  t.nnz = 0;
  CHECK_OK(hvds_sparse_allreduce_async(&t, NULL, &v1, &h));
  wait_ok(h, "v1 sparse");
  hvds_release(h);
  enum { N = 32768 };
  float* x = calloc(N, sizeof(float));
  x[N - 1] = 1;
  hvds_tensor_t dt = {x, HVDS_FLOAT32, -1, 1, {N}};
  v1.name = "v1.allreduce";
  CHECK_OK(hvds_allreduce_async(&dt, &dt, &v1, &h));
  wait_ok(h, "v1 allreduce");
  hvds_sparse_stats_t st;
  if (hvds__handle_sparse_stats(h, &st) != HVDS_INVALID_ARGUMENT)
    FAIL("v1 options ran sparse_detect");
  hvds_release(h);
  check_close(x[N - 1], size_, HVDS_FLOAT32, "v1 allreduce", N - 1);
  free(x);
}

/* The runtime stays usable after each. */
static void scenario_errors(void) {
  errors_mismatch();
  errors_bad_index();
  errors_local();
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: sparse_worker SCENARIO\n");
    return 2;
  }
  CHECK_OK(hvds_init());
  rank_ = hvds_rank();
  size_ = hvds_size();
  const char* s = argv[1];
  if (!strcmp(s, "basic"))
    scenario_basic();
  else if (!strcmp(s, "alloc"))
    scenario_alloc();
  else if (!strcmp(s, "errors"))
    scenario_errors();
  else if (!strcmp(s, "detect"))
    scenario_detect(0);
  else if (!strcmp(s, "detect_env"))
    scenario_detect(1);
  else if (!strcmp(s, "process_sets"))
    scenario_process_sets();
  else if (!strcmp(s, "join"))
    scenario_join();
  else if (!strcmp(s, "timeline"))
    scenario_timeline();
  else if (!strcmp(s, "net"))
    scenario_net();
  else if (!strcmp(s, "overlap"))
    scenario_overlap();
  else
    FAIL("unknown scenario %s", s);
  CHECK_OK(hvds_shutdown());
  printf("PASS %s rank %d of %d\n", s, rank_, size_);
  return 0;
}
