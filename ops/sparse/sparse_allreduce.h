/* Sparse allreduce over the point-to-point interface: the entry point a runtime calls, and the
 * registry of algorithms (one file each in ops/sparse/).
 *
 * One call, on every rank of p, with the same layout, op, tag and algorithm:
 *   1. normalize the caller's entries into a stream (sparse_stream.h): validate, sort, sum
 *      duplicates, dense switch;
 *   2. preamble: one small allreduce tells every rank every rank's unique-entry count, its
 *      input status and a signature of its arguments (and rank 0's ZEN key), so an invalid
 *      index or a disagreement fails every rank the same way before any data moves (no rank is
 *      left waiting);
 *   3. pick the algorithm (forced, or the cost model's cheapest for the agreed counts and rank
 *      0's overlap estimate);
 *   4. run it (Sum; Average is Sum and then 1/size, as Horovod does);
 *   5. hand the result back sparse (sorted unique indices; dense when the byte rule says so) or
 *      scattered into the caller's dense buffer, with its union size (from which a caller can
 *      estimate the overlap of the next call: hvds__sparse_overlap_estimate).
 * Results are bitwise identical on every rank. Blocks until done or failed; on failure p->error
 * holds the message (the same on every rank for argument and input errors).
 */
#ifndef HVDS_SPARSE_ALLREDUCE_H_
#define HVDS_SPARSE_ALLREDUCE_H_

#include <stddef.h>
#include <stdint.h>

#include "cost_model.h"
#include "p2p.h"
#include "sparse_stream.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  uint64_t tag;                 /* unique among operations running at once on p */
  hvds_sparse_algo_t algorithm; /* HVDS_SPARSE_AUTO: the cost model picks */
  hvds_sparse_net_t net;        /* the cost model's alpha and beta; zeros: defaults */
  double overlap;               /* the cost model's overlap estimate; < 0: unknown (uniform);
                                   rank 0's is used on every rank (it travels in the preamble) */
  uint64_t zen_seed;            /* ZEN's hash key; rank 0's is used on every rank (it travels
                                   in the preamble); 0 selects a fixed default */
  size_t chunk_bytes;           /* pipeline segment of the dense steps; 0 = default */
  int quant_bits;               /* 2, 4 or 8: the gather phase after the full-precision reduce
                                   (DSAR's dense allgather, split-allgather's sparse allgather,
                                   ZEN's pull) moves each reduced range's values stochastically
                                   quantized at that width (ops/quantize.h; indices exact),
                                   decoded on every rank; 0: full precision. Floating-point
                                   dtypes only (ignored for integers); dense, allgather and
                                   recursive doubling, which sum after their exchanges, stay
                                   exact; every rank must pass the same */
  double calib[HVDS_SPARSE_ALGO_COUNT]; /* AUTO's corrections per algorithm (measured /
                                   predicted time, <= 0 none; hvds__sparse_select_calibrated);
                                   rank 0's are used on every rank (they travel in the
                                   preamble) */
  int pack_indices;             /* recursive doubling's rounds and folds, split-allgather's
                                   folds and gather, ZEN's push and pull at full precision: 0
                                   delta-codes the indices on the wire when the cost model says
                                   the bytes saved outweigh the coding (slow links), 1 always,
                                   -1 never (quantized gathers always do); every rank must pass
                                   the same */
} hvds_sparse_opts_t;

/* Default options: AUTO, unknown overlap, default network and seed, no quantization, no
 * corrections, indices delta-coded where the cost model says so. */
#define HVDS_SPARSE_OPTS_INIT                                        \
  {                                                                  \
    0, HVDS_SPARSE_AUTO, {0, 0, 0, 0, 0, 0, 0}, -1.0, 0, 0, 0, {0}, 0 \
  }

typedef struct {
  /* IN */
  void* dense_out; /* dim * row values receiving the result (zeros where no rank had an entry),
                      or NULL for a sparse result */
  /* OUT, sparse result (dense_out NULL); free with hvds__sparse_result_free */
  int is_dense;  /* 1: values holds all dim rows and indices is NULL */
  size_t nnz;    /* entries: dim when is_dense */
  void* indices; /* nnz ascending unique indices of the layout's index type */
  void* values;  /* nnz * row values */
  void* owned;   /* the allocation behind indices and values */
  /* OUT, both kinds */
  hvds_sparse_algo_t algorithm; /* the algorithm that ran */
  size_t max_nnz;               /* unique input entries: largest on any rank */
  size_t total_nnz;             /* unique input entries: sum over ranks */
  size_t input_steps;           /* the cost model's steps for normalizing the inputs: the
                                   largest on any rank (hvds__sparse_input_steps) */
  size_t input_dense_steps;     /* the same for the dense baseline, which adds the entries of an
                                   input whose ordering could wait in as they come
                                   (sparse_input.h): the largest on any rank */
  double imbalance;             /* the inputs' index-range imbalance, the largest on any rank
                                   (hvds__sstream_range_imbalance) */
  double push_imbalance;        /* ZEN: P * largest block / total sent, worst rank; else 0 */
  double pull_imbalance;        /* ZEN: P * largest owner partition / union size; else 0 */
  double overlap;               /* the overlap the cost model was given: rank 0's opts */
  double calib[HVDS_SPARSE_ALGO_COUNT]; /* the corrections it was given: rank 0's opts */
  size_t union_nnz; /* rows of the sum (before Average) with a bit set, the same on
                       every rank: with Sum, the union of the ranks' supports less
                       the rows that summed to exactly zero */
} hvds_sparse_result_t;

/* The allreduce. indices: nnz indices of lay->index_dtype, any order, duplicates allowed (their
 * rows are summed); values: nnz * lay->row values of lay->dtype. op: Sum or Average with every
 * algorithm; Min, Max and Product only with HVDS_SPARSE_DENSE (AUTO picks it for them), over the
 * dense tensors the entries describe. res: dense_out set by the caller, the rest filled here.
 * Errors: HVDS_INVALID_ARGUMENT (bad layout, index outside [0, dim) on any rank: the message
 * names the rank, the index, its position and the bound; quant_bits not 0, 2, 4 or 8),
 * HVDS_NOT_SUPPORTED (op with a sparse algorithm), HVDS_PRECONDITION_ERROR (ranks passed
 * different layouts, ops, algorithms or quantization widths), and
 * transport errors. The caller's buffers are only read. */
hvds_result_t hvds__sparse_allreduce(hvds_p2p_t* p, const hvds_sparse_layout_t* lay,
                                     const void* indices, const void* values, size_t nnz,
                                     hvds_reduce_op_t op, const hvds_sparse_opts_t* o,
                                     hvds_sparse_result_t* res /* IN/OUT */);

/* Frees a sparse result's memory and empties it. Accepts a result with nothing allocated. */
void hvds__sparse_result_free(hvds_sparse_result_t* res);

/* Registry: the algorithm's name ("dense", "allgather", "ssar_recursive_doubling",
 * "ssar_split_allgather", "dsar_split_allgather", "zen"; "auto"), or NULL for an unknown id. */
const char* hvds__sparse_algo_name(hvds_sparse_algo_t a);
/* The id for a name (case-sensitive), or HVDS_SPARSE_ALGO_COUNT when unknown. */
hvds_sparse_algo_t hvds__sparse_algo_from_name(const char* name);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_SPARSE_ALLREDUCE_H_ */
