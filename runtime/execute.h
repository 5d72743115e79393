/* Execution of negotiated responses: pack, run the algorithm over the set's communicator,
 * unpack, scale, complete the handles. The cycle's owner only: the coordinator, or a caller that
 * runs the cycle while it waits (cycle.h). */
#ifndef HVDS_EXECUTE_H_
#define HVDS_EXECUTE_H_

#include "state.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Runs r on set s. Per-tensor failures (validation errors, allocation) complete the handles and
 * return HVDS_SUCCESS; a communication failure returns its code (the runtime cannot continue). */
hvds_result_t hvds__execute(hvds_pset_t* s, hvds_response_t* r);

/* Shared by the execute_*.c files. */
typedef struct {
  hvds_entry_t** entries; /* one per response name; NULL where this rank has none (joined) */
  int32_t n;
} hvds_exec_t;
/* Completes and frees an entry. */
void hvds__entry_finish(hvds_runtime_t* rt, hvds_entry_t* e, hvds_result_t status,
                        const char* message);
/* Frees an entry that was never queued or is already finished (accepts NULL). */
void hvds__entry_free(hvds_entry_t* e);
/* Allocates output i of e's handle with the given shape; NULL on failure (entry completed). */
void* hvds__entry_alloc_output(hvds_entry_t* e, int32_t ndim, const int64_t* shape, size_t bytes);
/* Frees the fusion buffer (at shutdown). */
void hvds__fusion_buffer_free(hvds_runtime_t* rt);
/* Ensures the fusion buffer holds at least bytes. */
void* hvds__fusion_buffer(hvds_runtime_t* rt, size_t bytes);
/* Scale factor to apply after reducing (Average divides by the set size). */
double hvds__post_factor(const hvds_pset_t* s, const hvds_response_t* r);
/* Applies r's post-reduction scaling to count elements of dtype at buf: Average without a
 * postscale factor divides by the set size (an average of equal values is then exact, as the
 * frameworks' own x * n / n), anything else multiplies by hvds__post_factor. */
void hvds__post_scale(const hvds_pset_t* s, const hvds_response_t* r, void* buf, size_t count,
                      hvds_dtype_t dtype);
/* Ring segment for an allreduce of bytes over nranks: the knob, else about a quarter block. */
size_t hvds__ring_chunk(hvds_runtime_t* rt, size_t bytes, int nranks);
/* Timeline helpers: no-ops unless this rank writes a timeline. */
void hvds__tl_start(hvds_runtime_t* rt, const hvds_response_t* r, const char* args);
void hvds__tl_activity(hvds_runtime_t* rt, const hvds_response_t* r,
                       const char* activity); /* NULL ends */
void hvds__tl_end(hvds_runtime_t* rt, const hvds_response_t* r, hvds_exec_t* x);

/* Elements in one row (every dimension after the first) of r's negotiated shape; the shape of
 * dim0 such rows. */
size_t hvds__row_elems(const hvds_response_t* r);
void hvds__out_shape(const hvds_response_t* r, int64_t dim0, int64_t* shape);
/* A reducescatter's blocks over n ranks (counts: elements per rank, Horovod's split of the first
 * dimension) and the shape of rank's block; returns that shape's rank. */
int32_t hvds__reducescatter_split(const hvds_response_t* r, int32_t n, int32_t rank, size_t* counts,
                                  int64_t* shape);

/* An alltoall's layout on this rank: the rows to and from every rank (the entry's splits, or
 * equal parts of the first dimension; the others' by exchange), both sides' blocks back to back
 * in rank order, and the output's shape. */
typedef struct {
  int32_t *send_splits, *recv_splits;
  size_t *send_bytes, *send_off, *recv_bytes, *recv_off;
  size_t received; /* bytes in all */
  int64_t shape[HVDS_MAX_DIMS];
} hvds_alltoall_plan_t;
struct hvds_backend;
/* Exchanges the splits over s by be's alltoallv and lays out p; the transport's failure, or
 * HVDS_SUCCESS with p to free by hvds__alltoall_plan_free. */
hvds_result_t hvds__alltoall_plan(hvds_pset_t* s, const hvds_response_t* r, const hvds_entry_t* e,
                                  const struct hvds_backend* be, hvds_alltoall_plan_t* p);
void hvds__alltoall_plan_free(hvds_alltoall_plan_t* p);
/* Keeps the received splits (n) in e's handle, where hvds_alltoall's caller reads them. */
void hvds__alltoall_keep_splits(hvds_runtime_t* rt, hvds_entry_t* e, const int32_t* recv,
                                int32_t n);

hvds_result_t hvds__exec_allgather(hvds_pset_t* s, hvds_response_t* r, hvds_exec_t* x);
hvds_result_t hvds__exec_broadcast(hvds_pset_t* s, hvds_response_t* r, hvds_exec_t* x);
hvds_result_t hvds__exec_alltoall(hvds_pset_t* s, hvds_response_t* r, hvds_exec_t* x);
hvds_result_t hvds__exec_reducescatter(hvds_pset_t* s, hvds_response_t* r, hvds_exec_t* x);
/* Sparse allreduce and sparse_detect allreduce (execute_sparse.c). */
hvds_result_t hvds__exec_sparse_allreduce(hvds_pset_t* s, hvds_response_t* r, hvds_exec_t* x);
/* Process-set registration (process_set.c). */
hvds_result_t hvds__exec_ps_add(hvds_pset_t* s, hvds_response_t* r, hvds_exec_t* x);
hvds_result_t hvds__exec_ps_remove(hvds_pset_t* s, hvds_response_t* r, hvds_exec_t* x);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_EXECUTE_H_ */
