/* Where the rows of the collectives whose output size comes from negotiation go: a row's
 * elements, an output's shape, a reducescatter's blocks, an alltoall's splits and offsets. The
 * host's execution (execute_gather.c) and the device backend share them. */
#include "exec_layout.h"

#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "process_set.h"

size_t hvds__row_elems(const hvds_response_t* r) {
  size_t n = 1;
  for (int32_t d = 1; d < r->nextra; d++) n *= (size_t)r->extra[d];
  return n;
}

void hvds__out_shape(const hvds_response_t* r, int64_t dim0, int64_t* shape) {
  shape[0] = dim0;
  for (int32_t d = 1; d < r->nextra; d++) shape[d] = r->extra[d];
}

int32_t hvds__reducescatter_split(const hvds_response_t* r, int32_t n, int32_t rank, size_t* counts,
                                  int64_t* shape) {
  size_t row = hvds__row_elems(r);
  int64_t dim0 = r->nextra > 0 ? r->extra[0] : 1;
  for (int32_t k = 0; k < n; k++) counts[k] = (size_t)(dim0 / n + (k < dim0 % n ? 1 : 0)) * row;
  hvds__out_shape(r, (int64_t)(counts[rank] / (row ? row : 1)), shape);
  if (row == 0) shape[0] = dim0 / n + (rank < dim0 % n ? 1 : 0);
  return r->nextra > 0 ? r->nextra : 1;
}

hvds_result_t hvds__alltoall_plan(hvds_pset_t* s, const hvds_response_t* r, const hvds_entry_t* e,
                                  hvds_set_alltoallv_fn alltoallv, hvds_alltoall_plan_t* p) {
  int32_t n = s->n;
  size_t row = hvds__row_elems(r) * hvds__dtype_bytes((hvds_dtype_t)r->dtype);
  /* Two allocations: the send and receive splits, then the byte counts and offsets of both. */
  memset(p, 0, sizeof(*p));
  p->send_splits = calloc((size_t)n * 2, sizeof(int32_t));
  p->send_bytes = calloc((size_t)n * 4, sizeof(size_t));
  if (p->send_splits == NULL || p->send_bytes == NULL) {
    hvds__alltoall_plan_free(p);
    return HVDS_SYSTEM_ERROR;
  }
  p->recv_splits = p->send_splits + n;
  p->send_off = p->send_bytes + n;
  p->recv_bytes = p->send_bytes + 2 * n;
  p->recv_off = p->send_bytes + 3 * n;
  for (int32_t k = 0; k < n; k++) {
    p->send_splits[k] = e->splits ? e->splits[k] : (int32_t)(e->input.shape[0] / n);
    p->send_bytes[k] = 4;  // the splits' own exchange: one int32 each way
    p->send_off[k] = (size_t)k * 4;
  }
  hvds_coll_opts_t o = {hvds__next_tag(s), HVDS_ALGO_AUTO, 0, 0};
  hvds_result_t rc = alltoallv(s, p->send_splits, p->send_bytes, p->send_off, p->recv_splits,
                               p->send_bytes, p->send_off, &o);
  if (rc != HVDS_SUCCESS) {
    hvds__alltoall_plan_free(p);
    return rc;
  }
  int64_t rows = 0;
  size_t sent = 0;
  for (int32_t k = 0; k < n; k++) {
    p->send_bytes[k] = (size_t)p->send_splits[k] * row;
    p->send_off[k] = sent;
    sent += p->send_bytes[k];
    p->recv_bytes[k] = (size_t)p->recv_splits[k] * row;
    p->recv_off[k] = p->received;
    p->received += p->recv_bytes[k];
    rows += p->recv_splits[k];
  }
  hvds__out_shape(r, rows, p->shape);
  return HVDS_SUCCESS;
}

void hvds__alltoall_plan_free(hvds_alltoall_plan_t* p) {
  free(p->send_splits);
  free(p->send_bytes);
  p->send_splits = NULL;
  p->send_bytes = NULL;
}

void hvds__alltoall_keep_splits(hvds_runtime_t* rt, hvds_entry_t* e, const int32_t* recv,
                                int32_t n) {
  pthread_mutex_lock(&rt->hmu);
  e->handle->recv_splits = malloc((size_t)n * sizeof(int32_t));
  if (e->handle->recv_splits) {
    memcpy(e->handle->recv_splits, recv, (size_t)n * sizeof(int32_t));
    e->handle->nrecv_splits = n;
  }
  pthread_mutex_unlock(&rt->hmu);
}
