/* Execution of a negotiated sparse allreduce (HVDS_MSG_SPARSE_ALLREDUCE); its checks at the
 * set's rank 0 and the response they make are sparse_request.c's.
 *
 * Sparse tensors (hvds_sparse_allreduce_async): the caller's entries go to
 * hvds__sparse_allreduce on the set's communicator, whose preamble agrees every rank's entry
 * count and input validity before data moves, so the algorithm (forced, or the cost model's pick)
 * is the same everywhere and a bad index fails every rank alike. The result goes densely to the
 * caller's output, or stays sparse on the handle (runtime memory, or the caller's allocator).
 *
 * Dense tensors under sparse_detect: every rank counts its non-zero rows (elements for 1-D), one
 * small MAX allreduce agrees the largest count, and the cost model (the same on every rank)
 * picks: dense runs the plain allreduce in the output; a sparse algorithm runs on the extracted
 * non-zero rows, forced, with the dense output.
 *
 * Overlap: after each successful step the overlap of the ranks' supports is estimated from the
 * agreed largest count and the result's union size (hvds__sparse_overlap_estimate), both the same
 * on every rank, and kept per tensor name in the set (hvds_pset_t.sparse_overlap); the next step
 * of that name gives it to the cost model (rank 0's travels with the counts, so every rank prices
 * alike). The first step of a name is priced as uniform independent supports.
 *
 * A rank that joined has no entry: it takes part with no entries and drops the result, and
 * learns the overlap like the others.
 * The timeline shows the algorithm as an activity SPARSE_<ALGORITHM> with the density, the
 * agreed counts, the overlap and the model's prediction as args; the debug log says the same,
 * with the model's time for every algorithm and ZEN's imbalance.
 */
#include "execute_sparse.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "collectives.h"
#include "dtype.h"
#include "handle.h"
#include "log.h"
#include "p2p.h"
#include "process_set.h"
#include "quantize.h"
#include "reduce.h"
#include "sparse_allreduce.h"
#include "sparse_memory.h"
#include "sparse_rt.h"
#include "timeline.h"

_Static_assert(HVDS_SPARSE_ALGO_COUNT <= 8, "hvds_sparse_stats_t.costs holds every algorithm");

/* One sparse allreduce being executed. */
typedef struct {
  hvds_pset_t* s;
  hvds_response_t* r;
  hvds_entry_t* e;          /* NULL on a rank that joined */
  hvds_sparse_layout_t lay; /* from the response: identical on every rank */
  int32_t format;           /* HVDS_SPARSE_COO, _ROWS or HVDS_SPARSE_DETECT */
  hvds_sparse_algo_t forced;
  int32_t quant_bits; /* the gather after the reduce: 2, 4 or 8 bits, 0 full precision */
  double overlap;     /* for the cost model: learned from the name's last step, -1 none;
                         rank 0's once agreed */
  double calib[HVDS_SPARSE_ALGO_COUNT]; /* the selector's corrections, likewise (0: none) */
  hvds_sparse_stats_t st;
  double t0, t1; /* monotonic seconds around the collective */
} job_t;

/* ---- statistics, timeline, log ---- */

/* The network and local work as measured at init, as the cost model takes them. */
static hvds_sparse_net_t measured_net(hvds_runtime_t* rt) {
  return (hvds_sparse_net_t){.alpha = rt->net_alpha,
                             .beta = rt->net_beta_loaded,
                             .gamma = rt->work_gamma,
                             .hash = rt->work_hash,
                             .qenc = rt->work_qenc,
                             .qdec = rt->work_qdec,
                             .round = rt->net_round};
}

/* The cost model's view of the agreed counts: every algorithm's time and its pick. */
static void model(hvds_runtime_t* rt, job_t* j, hvds_sparse_algo_t ran, int64_t max_nnz,
                  double input_steps, double input_dense, double imbalance) {
  hvds_sparse_stats_t* st = &j->st;
  hvds_sparse_net_t net = measured_net(rt);
  hvds_sparse_problem_t x = {j->s->n,
                             (double)j->lay.dim,
                             (double)j->lay.row,
                             (double)hvds__dtype_bytes(j->lay.dtype),
                             (double)hvds__sparse_idx_bytes(&j->lay),
                             (double)max_nnz,
                             j->overlap,
                             hvds__quant_dtype_ok(j->lay.dtype) ? j->quant_bits : 0,
                             input_steps,
                             imbalance,
                             rt->sparse_pack,
                             j->format == HVDS_SPARSE_DETECT,
                             input_dense};
  double costs[HVDS_SPARSE_ALGO_COUNT];
  hvds_sparse_algo_t pick = hvds__sparse_select_calibrated(&x, &net, j->calib, costs);
  for (int a = 0; a < HVDS_SPARSE_ALGO_COUNT; a++) {
    st->costs[a] = costs[a];
    st->calib[a] = j->calib[a];
  }
  st->algorithm = ran;
  st->auto_pick = pick;
  st->algorithm_name = hvds__sparse_algo_name(ran);
  st->auto_name = hvds__sparse_algo_name(pick);
  st->predicted_s = costs[ran];
  st->dim = (int64_t)j->lay.dim;
  st->row = (int64_t)j->lay.row;
  st->max_nnz = max_nnz;
  st->density = j->lay.dim > 0 ? (double)max_nnz / (double)j->lay.dim : 0;
  st->alpha = net.alpha;
  st->beta = net.beta;
  st->detect = j->format == HVDS_SPARSE_DETECT;
  st->overlap = j->overlap;
  st->input_steps = x.input, st->imbalance = x.imbalance, st->input_dense = x.input_dense;
  st->idx_bytes = x.idx_bytes, st->val_bytes = x.val_bytes;
  st->quant_bits = x.quant_bits, st->pack_indices = x.pack_indices;
  st->dense_input = x.dense_input;
  st->gamma = net.gamma, st->hash = net.hash, st->qenc = net.qenc, st->qdec = net.qdec;
  st->round = net.round;
}

/* The activity SPARSE_<ALGORITHM> with what the model knew, and the debug line. */
static void report(hvds_runtime_t* rt, job_t* j) {
  const hvds_sparse_stats_t* st = &j->st;
  const char* name = j->r->names[0];
  double* c = (double*)st->costs;
  char used[24] = "uniform", learned[24] = "none";
  if (st->overlap >= 0) snprintf(used, sizeof used, "%.3f", st->overlap);
  if (st->learned >= 0) snprintf(learned, sizeof learned, "%.3f", st->learned);
  HVDS_DEBUG(
      "sparse allreduce '%s': %s (cost model picks %s) on %d ranks, dim %lld x %lld, "
      "density %.4f%% (entries max %lld, total %lld), overlap %s (next step: %s), predicted "
      "%.3f ms, took %.3f ms; model ms: dense %.3f allgather %.3f ssar_recursive_doubling %.3f "
      "ssar_split_allgather %.3f dsar_split_allgather %.3f zen %.3f; learned corrections "
      "(measured / model, 0 none) %.2f %.2f %.2f %.2f %.2f %.2f; ZEN imbalance push %.2f pull "
      "%.2f",
      name, st->algorithm_name, st->auto_name, j->s->n, (long long)st->dim, (long long)st->row,
      st->density * 100, (long long)st->max_nnz, (long long)st->total_nnz, used, learned,
      st->predicted_s * 1e3, st->measured_s * 1e3, c[HVDS_SPARSE_DENSE] * 1e3,
      c[HVDS_SPARSE_ALLGATHER] * 1e3, c[HVDS_SPARSE_SSAR_RD] * 1e3, c[HVDS_SPARSE_SSAR_SAG] * 1e3,
      c[HVDS_SPARSE_DSAR] * 1e3, c[HVDS_SPARSE_ZEN] * 1e3, j->calib[HVDS_SPARSE_DENSE],
      j->calib[HVDS_SPARSE_ALLGATHER], j->calib[HVDS_SPARSE_SSAR_RD],
      j->calib[HVDS_SPARSE_SSAR_SAG], j->calib[HVDS_SPARSE_DSAR], j->calib[HVDS_SPARSE_ZEN],
      st->push_imbalance, st->pull_imbalance);
  if (!rt->timeline) return;
  char activity[64] = "SPARSE_";
  for (size_t i = 0; st->algorithm_name[i] && i + 8 < sizeof activity; i++)
    activity[7 + i] = (char)toupper((unsigned char)st->algorithm_name[i]);
  char args[512];
  snprintf(args, sizeof args,
           "{\"algorithm\":\"%s\",\"auto_pick\":\"%s\",\"density\":%.6g,\"max_nnz\":%lld,"
           "\"total_nnz\":%lld,\"result_nnz\":%lld,\"predicted_ms\":%.6g,\"push_imbalance\":%.3g,"
           "\"pull_imbalance\":%.3g,\"overlap\":%.4g,\"learned_overlap\":%.4g,\"alpha_us\":%.4g,"
           "\"gbytes_per_s\":%.4g}",
           st->algorithm_name, st->auto_name, st->density, (long long)st->max_nnz,
           (long long)st->total_nnz, (long long)st->result_nnz, st->predicted_s * 1e3,
           st->push_imbalance, st->pull_imbalance, st->overlap, st->learned, st->alpha * 1e6,
           st->beta > 0 ? 1e-9 / st->beta : 0.0);
  hvds__timeline_activity_span(rt->timeline, name, activity, j->t0, j->t1, args);
}

static void timeline_start(hvds_runtime_t* rt, job_t* j) {
  if (!rt->timeline) return;
  static const char* const formats[] = {"COO", "ROWS", "DENSE_DETECT"};
  char args[160];
  snprintf(args, sizeof args, "{\"format\":\"%s\",\"dim\":%zu,\"row\":%zu}", formats[j->format],
           j->lay.dim, j->lay.row);
  hvds__tl_start(rt, j->r, args);
}

/* ---- learned from earlier steps ---- */

/* What the name's earlier steps taught (sparse_memory.h): its overlap and the algorithms'
 * corrections; none on its first step (uniform supports, the model alone). */
static void recall(hvds_runtime_t* rt, job_t* j) {
  const hvds_sparse_memory_t* m = hvds__sparse_memory_find(j->s, j->r->names[0]);
  j->overlap = m != NULL ? m->overlap : -1.0;
  memset(j->calib, 0, sizeof j->calib);
  if (m != NULL && rt->sparse_learn_costs) memcpy(j->calib, m->calib, sizeof j->calib);
}

/* After a successful step: the overlap for which the model's union of the set's supports is the
 * measured one (k and union_size are the same on every rank, and so is the estimate; none for
 * one rank or no entries: the last one stays), and how the algorithm that ran compared with its
 * prediction (this rank's measurement: only rank 0's is used). */
static void learn(job_t* j, int64_t k, size_t union_size) {
  double w = hvds__sparse_overlap_estimate(j->s->n, (double)k, (double)union_size);
  j->st.learned = w;
  hvds_sparse_memory_t* m = hvds__sparse_memory_get(j->s, j->r->names[0]);
  if (m == NULL) return;
  if (w >= 0) m->overlap = w;
  hvds__sparse_memory_learn_cost(m, j->st.algorithm, j->st.measured_s,
                                 j->st.costs[j->st.algorithm]);
}

/* ---- results ---- */

/* Attaches o to the entry's handle (replacing an earlier one of a grouped detect). */
static void attach(hvds_runtime_t* rt, hvds_entry_t* e, hvds_sparse_out_t* o) {
  pthread_mutex_lock(&rt->hmu);
  hvds_sparse_out_t* old = e->handle->sparse;
  e->handle->sparse = o;
  pthread_mutex_unlock(&rt->hmu);
  hvds__sparse_out_free(old);
}

/* Copies the sparse result into memory from the caller's allocator: indices then values (values
 * only when dense). Returns 0, or -1 when the allocator returned NULL. */
static int copy_to_alloc(job_t* j, const hvds_sparse_result_t* res, hvds_sparse_out_t* o) {
  hvds_entry_t* e = j->e;
  const hvds_sparse_layout_t* lay = &j->lay;
  size_t rb = hvds__sparse_row_bytes(lay), isz = hvds__sparse_idx_bytes(lay);
  int64_t shape[HVDS_MAX_DIMS];
  memcpy(shape, e->input.shape, sizeof shape);
  int32_t ndim = e->input.ndim;
  if (!res->is_dense) {
    int64_t n = (int64_t)res->nnz;
    o->indices = e->alloc(e->alloc_ctx, lay->index_dtype, 1, &n, res->nnz * isz);
    if (o->indices == NULL) return -1;
    if (res->nnz) memcpy(o->indices, res->indices, res->nnz * isz);
    shape[0] = n;  // ROWS: nnz rows of the dense row shape; COO: nnz elements
    if (j->format == HVDS_SPARSE_COO) ndim = 1;
  }
  o->values = e->alloc(e->alloc_ctx, lay->dtype, ndim, shape, res->nnz * rb);
  if (o->values == NULL) return -1;
  if (res->nnz) memcpy(o->values, res->values, res->nnz * rb);
  return 0;
}

/* Hands the finished result to the handle (or drops it on a joined rank) and completes the
 * entry. Consumes res. */
static void deliver(hvds_runtime_t* rt, job_t* j, hvds_sparse_result_t* res, hvds_exec_t* x) {
  hvds_entry_t* e = j->e;
  hvds_sparse_out_t* o = e ? calloc(1, sizeof(*o)) : NULL;
  hvds_result_t status = HVDS_SUCCESS;
  const char* msg = NULL;
  if (e != NULL && o == NULL) {
    status = HVDS_SYSTEM_ERROR;
    msg = "sparse allreduce: out of memory";
  } else if (e != NULL) {
    o->stats = j->st;
    o->has_result = j->format != HVDS_SPARSE_DETECT;
    if (e->sparse_dense_out) {
      o->is_dense = 1;
      o->nnz = (int64_t)j->lay.dim;
      o->values = e->output.data;
    } else if (e->alloc != NULL) {
      o->is_dense = res->is_dense;
      o->nnz = (int64_t)res->nnz;
      if (copy_to_alloc(j, res, o) != 0) {
        status = HVDS_SYSTEM_ERROR;
        msg = "sparse allreduce: the output allocator returned NULL";
      }
    } else {  // runtime-owned: the result's own memory, no copy
      o->is_dense = res->is_dense;
      o->nnz = (int64_t)res->nnz;
      o->indices = res->indices;
      o->values = res->values;
      o->owned = res->owned;
      res->owned = NULL;
    }
  }
  hvds__sparse_result_free(res);
  hvds__tl_end(rt, j->r, x);
  if (e == NULL) return;
  if (status == HVDS_SUCCESS)
    attach(rt, e, o);
  else
    hvds__sparse_out_free(o);
  hvds__entry_finish(rt, e, status, msg);
  x->entries[0] = NULL;
}

/* Multiplies the result by factor (prescale * postscale: both are linear in a sum). */
static void scale_result(job_t* j, hvds_sparse_result_t* res, double factor) {
  if (factor == 1.0) return;
  if (res->dense_out != NULL)
    hvds__scale(res->dense_out, j->lay.dim * j->lay.row, j->lay.dtype, factor);
  else if (res->values != NULL)
    hvds__scale(res->values, res->nnz * j->lay.row, j->lay.dtype, factor);
}

/* After a failed collective: an error every rank got alike (arguments, inputs, disagreement)
 * fails this tensor only; anything else is the communicator's and ends the runtime. */
static hvds_result_t failed(hvds_runtime_t* rt, job_t* j, hvds_result_t rc, hvds_exec_t* x) {
  if (rc != HVDS_INVALID_ARGUMENT && rc != HVDS_NOT_SUPPORTED && rc != HVDS_PRECONDITION_ERROR)
    return rc;
  char msg[1024];
  if (j->s->id == 0)
    snprintf(msg, sizeof msg, "%s [tensor: %s]", j->s->comm->error, j->r->names[0]);
  else
    snprintf(msg, sizeof msg, "%s [tensor: %s; ranks of process set %d]", j->s->comm->error,
             j->r->names[0], j->s->id);
  HVDS_DEBUG("%s", msg);
  hvds__tl_end(rt, j->r, x);
  if (j->e == NULL) return HVDS_SUCCESS;
  hvds__entry_finish(rt, j->e, rc, msg);
  x->entries[0] = NULL;
  return HVDS_SUCCESS;
}

static hvds_sparse_opts_t sparse_opts(hvds_runtime_t* rt, job_t* j, hvds_sparse_algo_t algo) {
  hvds_sparse_opts_t o = HVDS_SPARSE_OPTS_INIT;
  o.tag = hvds__next_tag(j->s);
  o.algorithm = algo;
  o.net = measured_net(rt);
  o.zen_seed = rt->zen_seed;
  o.quant_bits = j->quant_bits;
  o.pack_indices = rt->sparse_pack;
  o.overlap = j->overlap;
  memcpy(o.calib, j->calib, sizeof o.calib);
  /* The dense steps (the dense baseline's allreduce, DSAR's and the gathers' rings) pipeline
   * in segments sized for the link as the dense path's are; the whole tensor bounds them. */
  o.chunk_bytes =
      hvds__ring_chunk(rt, (size_t)j->lay.dim * hvds__sparse_row_bytes(&j->lay), j->s->n);
  return o;
}

/* Runs hvds__sparse_allreduce on the given entries; statistics, scaling and timeline after. */
static hvds_result_t run_sparse(hvds_runtime_t* rt, job_t* j, hvds_sparse_algo_t algo,
                                const void* idx, const void* val, size_t nnz, void* dense_out,
                                double factor, hvds_exec_t* x) {
  hvds_sparse_result_t res = {.dense_out = dense_out};
  hvds_sparse_opts_t o = sparse_opts(rt, j, algo);
  hvds_reduce_op_t op = (hvds_reduce_op_t)j->r->reduce_op;
  j->t0 = hvds__now();
  hvds_result_t rc = hvds__sparse_allreduce(j->s->comm, &j->lay, idx, val, nnz, op, &o, &res);
  j->t1 = hvds__now();
  if (rc != HVDS_SUCCESS) {
    hvds__sparse_result_free(&res);
    return failed(rt, j, rc, x);
  }
  j->overlap = res.overlap;  // rank 0's: what the selector used
  memcpy(j->calib, res.calib, sizeof j->calib);
  // A dense tensor's extracted rows come sorted: their scan is priced with the extraction.
  int detect = j->format == HVDS_SPARSE_DETECT;
  double input = detect ? 0 : (double)res.input_steps;
  double input_dense = detect ? 0 : (double)res.input_dense_steps;
  model(rt, j, res.algorithm, (int64_t)res.max_nnz, input, input_dense, res.imbalance);
  j->st.total_nnz = (int64_t)res.total_nnz;
  j->st.result_nnz = dense_out != NULL ? -1 : (int64_t)res.nnz;
  j->st.push_imbalance = res.push_imbalance;
  j->st.pull_imbalance = res.pull_imbalance;
  j->st.measured_s = j->t1 - j->t0;
  learn(j, (int64_t)res.max_nnz, res.union_nnz);
  scale_result(j, &res, factor);
  report(rt, j);
  deliver(rt, j, &res, x);
  return HVDS_SUCCESS;
}

/* ---- sparse_detect ---- */

/* Rows of the dense input with a bit set (-0.0 counts: it is sent, the sum stays right), and how
 * unevenly they fall into the set's equal index ranges (the measure of
 * hvds__sstream_range_imbalance: 1 even, or when the rows would travel densely). */
static size_t count_rows(const job_t* j, double* imbalance) {
  const char* data = j->e->input.data;
  size_t rb = hvds__sparse_row_bytes(&j->lay), dim = j->lay.dim, total = 0, largest = 0;
  int m = j->s->n;
  for (int r = 0; r < m; r++) {
    size_t lo = hvds__sparse_part_lo(0, dim, m, r), hi = hvds__sparse_part_lo(0, dim, m, r + 1);
    size_t c = hvds__sparse_nonzero_rows(data + lo * rb, hi - lo, rb);
    total += c;
    if (c > largest) largest = c;
  }
  int even = total == 0 || hvds__sparse_dense_rule(&j->lay, total, dim);
  *imbalance = even ? 1.0 : (double)m * (double)largest / (double)total;
  return total;
}

/* The non-zero rows as entries, prescaled. On failure the buffers stay NULL: the sparse
 * allreduce then fails on every rank (a NULL input with entries), so no rank is left waiting. */
static void extract(job_t* j, size_t k, void** idx, void** val) {
  const hvds_sparse_layout_t* lay = &j->lay;
  size_t rb = hvds__sparse_row_bytes(lay), isz = hvds__sparse_idx_bytes(lay), n = 0;
  *idx = malloc(k * isz + 1);
  *val = malloc(k * rb + 1);
  if (*idx == NULL || *val == NULL) {
    free(*idx);
    free(*val);
    *idx = *val = NULL;
    return;
  }
  const unsigned char* p = j->e->input.data;
  for (size_t i = 0; i < lay->dim && n < k; i++) {
    if (hvds__sparse_row_is_zero(p + i * rb, rb)) continue;
    hvds__sparse_idx_set(lay, *idx, n, (int64_t)i);
    memcpy((char*)*val + n * rb, p + i * rb, rb);
    n++;
  }
  hvds__scale(*val, k * lay->row, lay->dtype, j->r->prescale);
}

/* The plain dense allreduce in the output (scratch zeros on a joined rank). */
static hvds_result_t detect_dense(hvds_runtime_t* rt, job_t* j, hvds_exec_t* x) {
  hvds_pset_t* s = j->s;
  hvds_response_t* r = j->r;
  size_t n = j->lay.dim * j->lay.row, bytes = n * hvds__dtype_bytes(j->lay.dtype);
  void* buf = j->e ? j->e->output.data : hvds__fusion_buffer(rt, bytes);
  if (buf == NULL) return hvds__coll_nomem(s->comm, "sparse_detect allreduce");
  if (j->e == NULL)
    memset(buf, 0, bytes);
  else if (buf != j->e->input.data && bytes)
    memcpy(buf, j->e->input.data, bytes);
  hvds__scale(buf, n, j->lay.dtype, r->prescale);
  hvds_coll_opts_t o = {hvds__next_tag(s), (hvds_algo_t)rt->allreduce_algo,
                        hvds__ring_chunk(rt, bytes, s->n), 0};
  o.rhd_max_bytes = hvds__rhd_max(rt);
  j->t0 = hvds__now();
  hvds_result_t rc = hvds__allreduce(s->comm, buf, n, j->lay.dtype, HVDS_SUM, &o);
  j->t1 = hvds__now();
  if (rc != HVDS_SUCCESS) return rc;
  // The union: the sum's non-zero rows (before Average, whose integer division may zero some).
  size_t rb = hvds__sparse_row_bytes(&j->lay);
  j->st.measured_s = j->t1 - j->t0;
  learn(j, j->st.max_nnz, hvds__sparse_nonzero_rows(buf, j->lay.dim, rb));
  hvds__post_scale(s, r, buf, n, j->lay.dtype);
  j->st.total_nnz = -1;  // not exchanged on this path
  j->st.result_nnz = -1;
  report(rt, j);
  hvds_sparse_result_t none = {0};
  deliver(rt, j, &none, x);
  return HVDS_SUCCESS;
}

/* One MAX allreduce agrees the largest count and index-range imbalance (a non-negative double's
 * bits order as the double does) and rank 0's overlap and corrections (their bits; the others
 * send the smallest int64, so the maximum is rank 0's whatever they are). */
static hvds_result_t detect_agree(job_t* j, int64_t k, int64_t* kmax /* OUT */, double* imb) {
  enum { WORDS = 3 + HVDS_SPARSE_ALGO_COUNT };
  int64_t v[WORDS] = {k};
  for (int i = 1; i < WORDS - 1; i++) v[i] = INT64_MIN;
  memcpy(&v[WORDS - 1], imb, sizeof(double));
  if (j->s->comm->rank == 0) {
    memcpy(&v[1], &j->overlap, sizeof(double));
    memcpy(&v[2], j->calib, sizeof j->calib);
  }
  hvds_coll_opts_t co = {hvds__next_tag(j->s), HVDS_ALGO_AUTO, 0, 0};
  HVDS_CHECK(hvds__allreduce(j->s->comm, v, WORDS, HVDS_INT64, HVDS_MAX, &co));
  *kmax = v[0];
  memcpy(imb, &v[WORDS - 1], sizeof(double));
  memcpy(&j->overlap, &v[1], sizeof(double));
  memcpy(j->calib, &v[2], sizeof j->calib);
  return HVDS_SUCCESS;
}

/* Counts, agrees on the largest count, lets the model choose, runs dense or sparse. */
static hvds_result_t run_detect(hvds_runtime_t* rt, job_t* j, hvds_exec_t* x) {
  double imb = 1.0;
  int64_t k = j->e ? (int64_t)count_rows(j, &imb) : 0, kmax;
  hvds_result_t rc = detect_agree(j, k, &kmax, &imb);
  if (rc != HVDS_SUCCESS) return rc;
  model(rt, j, HVDS_SPARSE_DENSE, kmax, 0, 0, imb);
  hvds_sparse_algo_t algo = j->forced != HVDS_SPARSE_AUTO ? j->forced
                            : j->s->n == 1                ? HVDS_SPARSE_DENSE
                                                          : (hvds_sparse_algo_t)j->st.auto_pick;
  if (algo == HVDS_SPARSE_DENSE) return detect_dense(rt, j, x);
  void *idx = NULL, *val = NULL;
  if (j->e != NULL && k > 0) extract(j, (size_t)k, &idx, &val);
  rc = run_sparse(rt, j, algo, idx, val, (size_t)k, j->e ? j->e->output.data : NULL,
                  j->r->postscale, x);
  free(idx);
  free(val);
  return rc;
}

/* ---- entry point ---- */

hvds_result_t hvds__exec_sparse_allreduce(hvds_pset_t* s, hvds_response_t* r, hvds_exec_t* x) {
  hvds_runtime_t* rt = s->rt;
  job_t j = {.s = s, .r = r, .e = x->entries[0]};
  if (r->nsizes < 2 || r->nextra < HVDS_SPARSE_META_COUNT || r->sizes[0] < 0 || r->sizes[1] < 0 ||
      r->extra[HVDS_SPARSE_META_FORMAT] < 0 || r->extra[HVDS_SPARSE_META_FORMAT] > 2) {
    if (j.e)
      hvds__entry_finish(rt, j.e, HVDS_INTERNAL_ERROR, "malformed sparse allreduce response");
    x->entries[0] = NULL;
    return HVDS_SUCCESS;
  }
  j.lay = (hvds_sparse_layout_t){(size_t)r->sizes[0], (size_t)r->sizes[1], (hvds_dtype_t)r->dtype,
                                 (hvds_dtype_t)r->extra[HVDS_SPARSE_META_INDEX]};
  j.format = r->extra[HVDS_SPARSE_META_FORMAT];
  j.forced = (hvds_sparse_algo_t)r->extra[HVDS_SPARSE_META_ALGO];
  j.quant_bits = r->extra[HVDS_SPARSE_META_QBITS];
  recall(rt, &j);
  j.st.learned = -1.0;
  timeline_start(rt, &j);
  if (j.format == HVDS_SPARSE_DETECT) return run_detect(rt, &j, x);
  hvds_entry_t* e = j.e;
  return run_sparse(rt, &j, j.forced, e ? e->sparse.indices : NULL, e ? e->sparse.values : NULL,
                    e ? (size_t)e->sparse.nnz : 0, e && e->sparse_dense_out ? e->output.data : NULL,
                    r->prescale * r->postscale, x);
}
