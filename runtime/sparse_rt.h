/* Sparse allreduce in the runtime: what the enqueue side (api_sparse.c), negotiation (table.c,
 * controller.c) and execution (execute_sparse.c) share.
 *
 * A sparse allreduce travels as one HVDS_MSG_SPARSE_ALLREDUCE request per rank. The request's
 * dtype, device and shape are the value dtype, device and dense shape; its extra carries
 * HVDS_SPARSE_META_COUNT ints (format, index dtype, forced algorithm, quantization) that rank 0
 * checks across
 * ranks like the shape. The response adds sizes = {dim, row}: the layout, so a rank that joined
 * (and has no entry) can take part with no entries. Sparse responses are never fused or cached.
 * A dense allreduce under sparse_detect travels the same way with format HVDS_SPARSE_DETECT.
 */
#ifndef HVDS_SPARSE_RT_H_
#define HVDS_SPARSE_RT_H_

#include <stddef.h>
#include <stdint.h>

#include "hvdsparse.h"
#include "message.h"

#ifdef __cplusplus
extern "C" {
#endif

struct hvds_entry;
struct hvds_pset;
struct hvds_runtime;

/* The ints of a SPARSE_ALLREDUCE request's and response's extra. */
enum {
  HVDS_SPARSE_META_FORMAT = 0, /* HVDS_SPARSE_COO, HVDS_SPARSE_ROWS or HVDS_SPARSE_DETECT */
  HVDS_SPARSE_META_INDEX = 1,  /* index dtype: HVDS_INT32 or HVDS_INT64 */
  HVDS_SPARSE_META_ALGO = 2,   /* hvds_sparse_algo_t; 0 (auto): the cost model picks */
  HVDS_SPARSE_META_QBITS = 3,  /* DSAR's allgather quantized to 2, 4 or 8 bits; 0 not */
  HVDS_SPARSE_META_COUNT = 4
};
/* Format of a dense tensor allreduced under sparse_detect. */
#define HVDS_SPARSE_DETECT 2
/* sparse_detect leaves smaller tensors to the plain (fusable, cached) allreduce: below this the
 * latency terms dominate and the cost model picks dense anyway. */
#define HVDS_SPARSE_DETECT_MIN_BYTES ((size_t)64 << 10)

/* What one sparse allreduce did: kept on its handle; read by hvdsparse-perf and the tests. */
typedef struct {
  int32_t algorithm;          /* hvds_sparse_algo_t that ran */
  int32_t auto_pick;          /* the selector's pick for the agreed counts: the least of
                                 costs[a] * calib[a] (calib[a] 0: costs[a] alone) */
  const char* algorithm_name; /* static strings */
  const char* auto_name;
  double predicted_s;         /* the model's time for the algorithm that ran */
  double costs[8];            /* the model's time per hvds_sparse_algo_t id ([0]: the pick's,
                                 corrected) */
  double calib[8];            /* the corrections the selector used (rank 0's: measured /
                                 predicted time of the name's earlier runs; 0 none) */
  double measured_s;          /* this rank's time in the collective */
  double density;             /* largest per-rank unique entry count / dim */
  int64_t dim, row;           /* the layout */
  int64_t max_nnz, total_nnz; /* unique input entries: largest on a rank, sum over ranks (-1:
                                 not exchanged, sparse_detect's dense path) */
  int64_t result_nnz;         /* entries of the result (dim when it came out dense; -1 when it
                                 went to a dense output) */
  double push_imbalance;      /* ZEN only, else 0 */
  double pull_imbalance;
  double alpha, beta; /* the network the model used (seconds per message, per byte) */
  int32_t detect;     /* 1: a dense tensor under sparse_detect */
  double overlap;     /* the overlap the model used, learned from the name's previous step (rank
                         0's, so the same on every rank); -1: none yet, priced as uniform */
  double learned;     /* the overlap this step's union gives, for the name's next step; -1: none
                         (one rank, no entries) */
  /* The rest of what the model was given (hvds_sparse_problem_t and hvds_sparse_net_t), so that
   * a recorded run can be priced again (bench/sparse_replay.py): */
  double input_steps, imbalance; /* the slowest rank's input entry steps; range imbalance */
  double input_dense;            /* > 0: the dense allreduce's input steps instead (the
                                    entries added in unsorted, sparse_input.h) */
  double idx_bytes, val_bytes;   /* per index, per value */
  int32_t quant_bits;            /* the gather phase's bits per value (0: full precision) */
  int32_t pack_indices;          /* 1 always, -1 never, 0 where cheaper */
  int32_t dense_input;           /* 1: a dense tensor (sparse_detect) */
  double gamma, hash, qenc, qdec, round; /* local work and rounds, seconds (work_probe.h) */
} hvds_sparse_stats_t;

/* A handle's sparse result (hvds_handle_rec_t.sparse); guarded by rt->hmu once attached. */
typedef struct hvds_sparse_out {
  int32_t has_result; /* a sparse allreduce finished: the fields below are its result */
  int64_t nnz;        /* entries (every element of the dense shape when is_dense) */
  void* indices;      /* NULL when is_dense */
  void* values;
  int32_t is_dense;
  void* owned; /* runtime-owned memory behind indices and values; NULL with opts->alloc */
  hvds_sparse_stats_t stats;
} hvds_sparse_out_t;

/* Frees o and the memory it owns. Accepts NULL. */
void hvds__sparse_out_free(hvds_sparse_out_t* o);

/* The statistics of the sparse allreduce (or sparse_detect allreduce) of a completed handle.
 * HVDS_INVALID_ARGUMENT for an unknown handle or one without them, HVDS_IN_PROGRESS while
 * pending. Any thread. */
hvds_result_t hvds__handle_sparse_stats(hvds_handle_t handle, hvds_sparse_stats_t* out /* OUT */);

/* ---- enqueue (api_sparse.c) ---- */

/* The forced algorithm of o (the option when o->size covers it, else the knob's default) into
 * *algo (hvds_sparse_algo_t). HVDS_INVALID_ARGUMENT, with the message recorded for
 * hvds_last_error(), for an unknown name. */
hvds_result_t hvds__sparse_opts_algo(struct hvds_runtime* rt, const hvds_op_options_t* o,
                                     const char* tensor, int32_t* algo /* OUT */);
/* Turns the allreduce entry e into a sparse_detect one when o (or the knob) asks for it and the
 * tensor qualifies (Sum or Average, at least HVDS_SPARSE_DETECT_MIN_BYTES, a dtype with a sum
 * kernel); leaves it alone otherwise. Fails only for an unknown forced algorithm. */
hvds_result_t hvds__sparse_detect_entry(struct hvds_runtime* rt, struct hvds_entry* e,
                                        const hvds_op_options_t* o);

/* ---- negotiation at the set's rank 0 (execute_sparse.c) ---- */

/* Compares the sparse parts of two SPARSE_ALLREDUCE requests (shape, dtype and op are checked by
 * the caller). Returns 0, or the length of Horovod-style text written to err. */
int hvds__sparse_validate(const hvds_request_t* a, const hvds_request_t* b, char* err, size_t len);
/* Fills the response's sizes (dim, row) and extra from request a. Returns 0, or -1 when out of
 * memory. */
int hvds__sparse_response_fill(hvds_response_t* out, const hvds_request_t* a);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_SPARSE_RT_H_ */
