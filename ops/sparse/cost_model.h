/* The sparse allreduce algorithms and their alpha-beta costs.
 *
 * Each algorithm's cost is latency (alpha per message) plus bytes on the busiest rank's links
 * (beta per byte), from the formulas in design/papers/sparcml.md section 3 and zen.md section 2,
 * with every exchange counted the way our implementations run it (a count message before each
 * variable-size payload, a fold for non-powers of two), plus the local work the papers leave
 * out (sorting, merging, hashing, dense passes; gamma and hash in hvds_sparse_net_t), which on
 * slow or shared cores outweighs the bytes. The selector returns the cheapest.
 *
 * Determinism: the costs use only +, -, *, / and comparisons (no libm), so identical inputs give
 * bit-identical costs and the same choice on every rank; ties go to the lower algorithm id.
 */
#ifndef HVDS_SPARSE_COST_MODEL_H_
#define HVDS_SPARSE_COST_MODEL_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Algorithm ids: the registry (sparse_allreduce.h) maps them to names and functions. */
typedef enum {
  HVDS_SPARSE_AUTO = 0,      /* the cost model picks */
  HVDS_SPARSE_DENSE = 1,     /* scatter to dense, dense allreduce */
  HVDS_SPARSE_ALLGATHER = 2, /* allgather indices and values, merge (Horovod's sparse path) */
  HVDS_SPARSE_SSAR_RD = 3,   /* SparCML SSAR_Recursive_double */
  HVDS_SPARSE_SSAR_SAG = 4,  /* SparCML SSAR_Split_allgather */
  HVDS_SPARSE_DSAR = 5,      /* SparCML DSAR_Split_allgather */
  HVDS_SPARSE_ZEN = 6,       /* ZEN balanced parallelism */
  HVDS_SPARSE_ALGO_COUNT = 7
} hvds_sparse_algo_t;

/* The network: measured by the runtime at init; zeros select the defaults below. */
typedef struct {
  double alpha; /* seconds per message */
  double beta;  /* seconds per byte */
  /* Local work, measured by the runtime at init; zeros leave it out of the costs: */
  double gamma; /* seconds per entry step: one entry moved by a radix-sort pass (a merge step
                   counts two, 16 bytes of values carried one more) */
  double hash;  /* seconds per keyed hash or its inverse (ZEN's permutation) */
  double qenc;  /* seconds to quantize one value (ops/quantize.h), for quant_bits */
  double qdec;  /* seconds to decode one quantized value */
  double round; /* seconds per synchronizing round beyond alpha: a step that waits for its peer
                   to be scheduled (a message that follows the partner's previous one at once,
                   such as a payload after its count, is not a round) */
} hvds_sparse_net_t;

/* Defaults: a 10 GbE-like link (20 us per message, 1.25 GB/s). */
#define HVDS_SPARSE_DEFAULT_ALPHA 20e-6
#define HVDS_SPARSE_DEFAULT_BETA (1.0 / 1.25e9)

/* One allreduce, as every rank knows it after the size exchange. */
typedef struct {
  int ranks;        /* P */
  double dim;       /* N: indices in the dense shape (elements, or rows for row-sparse) */
  double row;       /* D: values per index (1 for COO) */
  double val_bytes; /* bytes per value */
  double idx_bytes; /* bytes per index (4 or 8) */
  double nnz;       /* k: the largest number of unique indices on any rank */
  double overlap;   /* pairwise overlap |A n B| / k in [0, 1]; < 0: independent uniform */
  int quant_bits;   /* the gather phase after the full-precision reduce (DSAR's and
                       split-allgather's allgather, ZEN's pull) quantized at 2, 4 or 8 bits per
                       value (plus a float32 scale per 1024 values); 0: full precision */
  double input;     /* entry steps the slowest rank took to bring its input into order (the
                       scan, and the sort and summing of an unsorted one); every algorithm pays
                       them (0: left out) */
  double imbalance; /* P times the largest share of a rank's entries in one of P equal index
                       ranges, worst rank (hvds__sstream_range_imbalance): the range-partitioned
                       algorithms' (split-allgather's) busiest rank moves and merges that many
                       times the average; ZEN's hashed ranges are even. <= 1: even */
  int pack_indices; /* recursive doubling, split-allgather and ZEN with delta-coded indices on the
                       wire: 0 where cheaper (hvds__sparse_packs), 1 always, -1 never */
  int dense_input;  /* 1: each rank holds a dense tensor (sparse_detect): the dense allreduce
                       runs on it as it is, every sparse algorithm first extracts its non-zero
                       rows (a pass over N rows, k rows copied out, then scanned in order) */
  double input_dense; /* > 0: the entry steps the dense allreduce pays for the input instead of
                         `input` (an unsorted input it adds in as it comes, sparse_input.h) */
} hvds_sparse_problem_t;

/* Expected size of the union of m ranks' supports: N (1 - (1 - k/N)^m) for independent uniform
 * supports (overlap < 0), else min(N, k (overlap + m (1 - overlap))), the shared-pool model
 * (overlap 1: identical supports, 0: disjoint). */
double hvds__sparse_union(const hvds_sparse_problem_t* x, int m);

/* The overlap that makes the shared-pool model's union of all `ranks` supports equal a measured
 * union: w = (P k - U) / ((P - 1) k), clamped to [0, 1] (U = k: identical supports, 1; U = P k:
 * disjoint, 0). k is the largest per-rank count, as in hvds_sparse_problem_t.nnz. Returns -1 (no
 * estimate) for one rank or k <= 0. Only +, -, * and /: identical inputs give identical bits. */
double hvds__sparse_overlap_estimate(int ranks, double k, double union_size);

/* Predicted seconds for algorithm a (not AUTO); net NULL or zero fields: the defaults. Returns a
 * huge value for an id it does not know. Recursive doubling, split-allgather and ZEN are priced
 * packed or not, as hvds__sparse_packs says. */
double hvds__sparse_cost(hvds_sparse_algo_t a, const hvds_sparse_problem_t* x,
                         const hvds_sparse_net_t* net);

/* 1 when algorithm a sends its sparse streams as packed blocks (sparse_quant.h: delta-coded
 * indices): recursive doubling's rounds and folds, split-allgather's folds and gather, ZEN's push
 * and pull.
 * Split-allgather and ZEN when quantized, any of the three when x->pack_indices is 1, or when it
 * is 0 and the bytes saved cost less than the coding (the cheaper of the two predictions); never
 * the others (allgather, Horovod's path, stays as it is). */
int hvds__sparse_packs(hvds_sparse_algo_t a, const hvds_sparse_problem_t* x,
                       const hvds_sparse_net_t* net);

/* 1 when halving-doubling is the cheaper dense allreduce for x, 0 for the ring: the dense
 * baseline runs the one its cost was priced with. */
int hvds__sparse_dense_rhd(const hvds_sparse_problem_t* x, const hvds_sparse_net_t* net);

/* The cheapest algorithm for x (ties to the lower id). With costs non-NULL, costs[a] receives
 * every algorithm's prediction (costs[HVDS_SPARSE_AUTO] = the chosen one's). */
hvds_sparse_algo_t hvds__sparse_select(const hvds_sparse_problem_t* x, const hvds_sparse_net_t* net,
                                       double costs[HVDS_SPARSE_ALGO_COUNT]);

/* hvds__sparse_select with corrections learned from runs: calib[a] > 0 multiplies algorithm a's
 * prediction (the measured / predicted time of its earlier runs on this tensor), <= 0 leaves it
 * as predicted; calib NULL: none. costs[a] still receives the uncorrected predictions
 * (costs[HVDS_SPARSE_AUTO]: the pick's corrected one). An algorithm that has not run keeps its
 * prediction, so a tensor whose runs came out slower than predicted tries the others the model
 * ranks close before settling on the fastest measured. */
hvds_sparse_algo_t hvds__sparse_select_calibrated(const hvds_sparse_problem_t* x,
                                                  const hvds_sparse_net_t* net,
                                                  const double calib[HVDS_SPARSE_ALGO_COUNT],
                                                  double costs[HVDS_SPARSE_ALGO_COUNT]);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_SPARSE_COST_MODEL_H_ */
