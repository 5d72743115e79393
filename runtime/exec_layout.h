/* Where the rows of allgather, reducescatter and alltoall go, for the host's execution and the
 * device backend alike. */
#ifndef HVDS_EXEC_LAYOUT_H_
#define HVDS_EXEC_LAYOUT_H_

#include "collectives.h"
#include "state.h"

#ifdef __cplusplus
extern "C" {
#endif

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
/* An alltoallv over a set's ranks, as a backend runs it (backend.h). */
typedef hvds_result_t (*hvds_set_alltoallv_fn)(hvds_pset_t* s, const void* sendbuf,
                                               const size_t* send_bytes, const size_t* send_off,
                                               void* recvbuf, const size_t* recv_bytes,
                                               const size_t* recv_off, const hvds_coll_opts_t* o);
/* Exchanges the splits over s by alltoallv and lays out p; the transport's failure, or
 * HVDS_SUCCESS with p to free by hvds__alltoall_plan_free. */
hvds_result_t hvds__alltoall_plan(hvds_pset_t* s, const hvds_response_t* r, const hvds_entry_t* e,
                                  hvds_set_alltoallv_fn alltoallv, hvds_alltoall_plan_t* p);
void hvds__alltoall_plan_free(hvds_alltoall_plan_t* p);
/* Keeps the received splits (n) in e's handle, where hvds_alltoall's caller reads them. */
void hvds__alltoall_keep_splits(hvds_runtime_t* rt, hvds_entry_t* e, const int32_t* recv,
                                int32_t n);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_EXEC_LAYOUT_H_ */
