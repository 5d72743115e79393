/* What a process set remembers of each sparse allreduce name between steps: the overlap of the
 * ranks' supports, and how each algorithm's measured time compared with the cost model's
 * prediction. The next step of the name gives both to the selector (rank 0's travel with the
 * counts, so every rank picks alike). Cycle owner only. */
#ifndef HVDS_SPARSE_MEMORY_H_
#define HVDS_SPARSE_MEMORY_H_

#include "cost_model.h"

#ifdef __cplusplus
extern "C" {
#endif

struct hvds_pset;

typedef struct {
  double overlap;                       /* learned from the last step; -1: none */
  double calib[HVDS_SPARSE_ALGO_COUNT]; /* measured / predicted time per algorithm: the least
                                           over its warm runs; 0: none yet */
  int runs[HVDS_SPARSE_ALGO_COUNT];     /* runs of each algorithm on this name */
} hvds_sparse_memory_t;

/* The name's memory, or NULL (its first step). */
const hvds_sparse_memory_t* hvds__sparse_memory_find(struct hvds_pset* s, const char* name);
/* The name's memory, created empty when new (past HVDS_SPARSE_MEMORY_NAMES names the set forgets
 * them all first: every member runs the same steps in the same order, so all forget at once).
 * NULL when out of memory, which is harmless: the next step takes rank 0's values. */
hvds_sparse_memory_t* hvds__sparse_memory_get(struct hvds_pset* s, const char* name);
/* Folds one run of algorithm a into m: its ratio of measured to predicted seconds, the least over
 * the algorithm's runs but the first (a warm-up: fresh buffers, page faults), so that one
 * stalled run on loaded cores does not bar an algorithm for good. Nothing when either time is not
 * positive. Used only with HVDSPARSE_SPARSE_LEARN_COSTS=1 (docs/sparse.md: it chose worse than
 * the model alone). */
void hvds__sparse_memory_learn_cost(hvds_sparse_memory_t* m, hvds_sparse_algo_t a,
                                    double measured_s, double predicted_s);
/* Forgets every name. Cannot fail. */
void hvds__sparse_memory_clear(struct hvds_pset* s);

#define HVDS_SPARSE_MEMORY_NAMES 4096

#ifdef __cplusplus
}
#endif
#endif /* HVDS_SPARSE_MEMORY_H_ */
