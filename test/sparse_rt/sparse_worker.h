/* The sparse allreduce test worker, run under `hvdsparse run -np N sparse_worker SCENARIO`: the
 * helpers its two files share. Every rank can regenerate every rank's input (seeded by rank),
 * so each checks its result against the sum it computes itself; some scenarios also compare
 * with the runtime's dense allreduce of the same data. */
#ifndef HVDS_SPARSE_WORKER_H_
#define HVDS_SPARSE_WORKER_H_

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "hvdsparse.h"
#include "../common/worker_check.h"

extern int rank_, size_;

/* One sparse tensor's description: format, types, dense shape. */
typedef struct {
  hvds_sparse_format_t format;
  hvds_dtype_t index_dtype, dtype;
  int32_t ndim;
  int64_t shape[HVDS_MAX_DIMS];
} layout_t;

/* A rank's generated entries (owned buffers). */
typedef struct {
  int64_t nnz;
  void* indices;
  void* values;
} entries_t;

int64_t lay_dim(const layout_t* l); /* indices: elements (COO) or rows (ROWS) */
int64_t lay_row(const layout_t* l); /* values per index */
int64_t lay_numel(const layout_t* l);

/* Rank r's entries for (seed, dense): few entries with duplicates, or (dense != 0) about twice
 * dim entries, so the union is dense. Values are small positive integers. */
void gen_entries(const layout_t* l, uint64_t seed, int r, int dense, entries_t* out /* OUT */);
void free_entries(entries_t* e);
/* The sum over ranks (those with member[r], or all when member is NULL) of their entries,
 * densely (numel doubles, caller frees); hit[i] (dim bytes, caller frees) marks indices with an
 * entry on some rank. */
double* expected_sum(const layout_t* l, uint64_t seed, int dense, const int* member,
                     unsigned char** hit /* OUT */);
hvds_sparse_tensor_t sparse_view(const layout_t* l, const entries_t* e);

double get_el(const void* p, hvds_dtype_t dt, size_t i);
void set_el(void* p, hvds_dtype_t dt, size_t i, double v);
int64_t get_idx(const void* p, hvds_dtype_t dt, size_t i);
/* |got - want| within the tolerance of dt (exact for integers). */
void check_close(double got, double want, hvds_dtype_t dt, const char* what, size_t i);

/* Checks a completed sparse allreduce against want (numel doubles already scaled): the dense
 * output when dense_out is non-NULL, else the handle's sparse result (hit marks the union). */
void check_result(const layout_t* l, hvds_handle_t h, const void* dense_out, const double* want,
                  const unsigned char* hit, const char* what);
void wait_ok(hvds_handle_t h, const char* what);
/* Waits for h and requires failure rc with every needle in the message. */
void wait_fails(hvds_handle_t h, hvds_result_t rc, const char* what, const char* needle1,
                const char* needle2);

/* sparse_worker_more.c */
void scenario_detect(int use_env_default);
void scenario_process_sets(void);
void scenario_join(void);
void scenario_timeline(void);
void scenario_net(void);

/* sparse_worker_overlap.c */
void scenario_overlap(void);

#endif /* HVDS_SPARSE_WORKER_H_ */
