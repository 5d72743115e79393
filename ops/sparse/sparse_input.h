/* The caller's entries as the sparse allreduce takes them in: indices in any order, duplicates
 * allowed (their rows are summed, in input order, whatever the reduce op), values nnz * row.
 *
 * Every algorithm but one needs them as a stream (sparse_stream.h: sorted, unique, dense by the
 * byte rule), and ordering an unsorted input is a radix sort, the largest part of the local work
 * at high densities. The dense baseline needs no order: it adds the entries into its tensor as
 * they come. So an unsorted input may be taken in two steps: checked and counted first (the
 * distinct indices marked in a bitmap of the dense range, which gives the counts the selector
 * needs), then ordered only if the algorithm chosen needs a stream. Everything the ordering
 * allocates is allocated in the first step, so a rank short of memory says so in the preamble,
 * where every rank fails alike, and the second step cannot fail.
 */
#ifndef HVDS_SPARSE_INPUT_H_
#define HVDS_SPARSE_INPUT_H_

#include "sparse_stream.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Why a caller's input was rejected. */
typedef enum {
  HVDS_SPARSE_INPUT_OK = 0,
  HVDS_SPARSE_INPUT_BAD_INDEX = 1, /* index outside [0, dim) */
  HVDS_SPARSE_INPUT_NULL = 2,      /* nnz > 0 with a NULL indices or values pointer */
  HVDS_SPARSE_INPUT_NOMEM = 3      /* out of memory */
} hvds_sparse_input_status_t;

typedef struct {
  hvds_sparse_input_status_t status;
  int64_t index;   /* BAD_INDEX: the first offending index */
  size_t position; /* BAD_INDEX: its position in the caller's array */
  double steps;    /* OK: entry steps of bringing the input into order (hvds__sparse_input_steps;
                      with a deferred ordering, the counting pass too) */
} hvds_sparse_input_check_t;

/* Builds the stream over [0, dim) from the caller's nnz entries at once. Returns
 * HVDS_INVALID_ARGUMENT (BAD_INDEX, NULL) or HVDS_SYSTEM_ERROR (NOMEM) with chk filled; the
 * caller's buffers are never modified. */
hvds_result_t hvds__sstream_from_input(const hvds_sparse_layout_t* lay, const void* indices,
                                       const void* values, size_t nnz,
                                       hvds_sparse_input_check_t* chk /* OUT */,
                                       hvds_sstream_t* out /* OUT */);

/* Entry steps of bringing n input entries of rb-byte rows into order (the cost model's input
 * term, in hvds__sparse_sort_steps' units): a scan of the indices and the copy when sorted;
 * else also the keys, the radix sort over [0, max_key] and the summing pass. */
double hvds__sparse_input_steps(double n, double max_key, double rb, int sorted);

/* An input taken in, ordered or not yet. */
typedef struct {
  hvds_sparse_layout_t lay;
  const void* indices;
  const char* values;
  size_t nnz;
  hvds_sparse_input_check_t chk;
  size_t entries;       /* of the ordered stream: the distinct indices, or dim when the byte rule
                           makes it dense */
  double imbalance;     /* of the ordered stream over the ranges asked for
                           (hvds__sstream_range_imbalance) */
  double scatter_steps; /* the entry steps the dense baseline pays for this input: the counting
                           pass when the ordering waits (it adds the entries in as they come),
                           else chk.steps */
  int deferred;         /* 1: not ordered yet; stream is allocated, keys and marks hold */
  hvds_sstream_t stream;
  uint64_t* keys;  /* deferred: 2 nnz words for the sort */
  uint64_t* marks; /* deferred: a bit per index of [0, dim), set where an entry is present */
} hvds_sparse_input_t;

/* Checks the entries and counts them (imbalance over `ranges` equal index ranges). With
 * may_defer set, an unsorted input with more than one entry per 16 indices of its dense range
 * (where the dense allreduce may be chosen) whose entries pack into one word each waits to be
 * ordered; any other is ordered now. Fails as hvds__sstream_from_input, chk filled. */
hvds_result_t hvds__sparse_input_take(const hvds_sparse_layout_t* lay, const void* indices,
                                      const void* values, size_t nnz, int ranges, int may_defer,
                                      hvds_sparse_input_t* in /* OUT */);
/* Orders a deferred input into in->stream (nothing to do otherwise). Cannot fail. */
void hvds__sparse_input_order(hvds_sparse_input_t* in);
/* Writes the input's sum per index into dense (dim rows, zeros elsewhere), the same bits as
 * hvds__sstream_to_dense of the ordered stream: an ordered input from its stream, a deferred one
 * from the entries as they come (the first of an index copied, the next ones added, in input
 * order), which uses up its marks: order it no more after. */
void hvds__sparse_input_to_dense(hvds_sparse_input_t* in, void* dense);
/* Frees what the input holds, the stream included unless taken (emptied). */
void hvds__sparse_input_free(hvds_sparse_input_t* in);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_SPARSE_INPUT_H_ */
