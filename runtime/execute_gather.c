/* Execution of the collectives whose output size comes from negotiation: allgather, alltoall,
 * reducescatter; and broadcast. None of them is fused. */
#include "execute_gather.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "collectives.h"
#include "copy.h"
#include "dtype.h"
#include "exec_layout.h"
#include "p2p.h"
#include "process_set.h"
#include "reduce.h"

hvds_result_t hvds__exec_allgather(hvds_pset_t* s, hvds_response_t* r, hvds_exec_t* x) {
  hvds_runtime_t* rt = s->rt;
  hvds_entry_t* e = x->entries[0];
  if (e == NULL) return HVDS_SUCCESS;
  size_t row = hvds__row_elems(r) * hvds__dtype_bytes((hvds_dtype_t)r->dtype);
  size_t* bytes = calloc((size_t)s->n, sizeof(size_t));
  if (bytes == NULL) {
    hvds__entry_finish(rt, e, HVDS_SYSTEM_ERROR, "out of memory");
    x->entries[0] = NULL;
    return HVDS_SUCCESS;
  }
  int64_t rows = 0;
  size_t off = 0;
  for (int32_t k = 0; k < s->n; k++) {
    bytes[k] = (size_t)r->sizes[k] * row;
    if (k < s->my_rank) off += bytes[k];
    rows += r->sizes[k];
  }
  int64_t shape[HVDS_MAX_DIMS];
  hvds__out_shape(r, rows, shape);
  hvds__tl_start(rt, r, NULL);
  hvds__tl_activity(rt, r, "ALLOCATE_OUTPUT");
  char* out = hvds__entry_alloc_output(e, r->nextra, shape, (size_t)rows * row);
  hvds__tl_activity(rt, r, NULL);
  hvds_result_t rc = HVDS_SUCCESS;
  /* Without an output, still take part (in scratch) so the other ranks are not left waiting. */
  char* buf = out ? out : hvds__fusion_buffer(rt, (size_t)rows * row);
  if (buf == NULL) {
    free(bytes);
    return HVDS_SYSTEM_ERROR;
  }
  hvds__copy(buf + off, e->input.data, bytes[s->my_rank]);
  hvds_coll_opts_t o = {hvds__next_tag(s), HVDS_ALGO_AUTO, 0, 0};
  hvds__tl_activity(rt, r, "GLOO_ALLGATHER");
  rc = hvds__backend_for(s, r, 0)->allgatherv(s, buf, bytes, &o);
  hvds__tl_activity(rt, r, NULL);
  free(bytes);
  if (rc != HVDS_SUCCESS) return rc;
  hvds__tl_end(rt, r, x);
  hvds__entry_finish(rt, e, out ? HVDS_SUCCESS : HVDS_SYSTEM_ERROR,
                     out ? NULL : "allgather: the output allocator returned NULL");
  x->entries[0] = NULL;
  return HVDS_SUCCESS;
}

hvds_result_t hvds__exec_broadcast(hvds_pset_t* s, hvds_response_t* r, hvds_exec_t* x) {
  hvds_runtime_t* rt = s->rt;
  hvds_entry_t* e = x->entries[0];
  if (e == NULL) return HVDS_SUCCESS;
  size_t bytes = (size_t)r->sizes[0] * hvds__dtype_bytes((hvds_dtype_t)r->dtype);
  hvds_coll_opts_t o = {hvds__next_tag(s), HVDS_ALGO_AUTO, 0, 0};
  hvds__tl_start(rt, r, NULL);
  hvds__tl_activity(rt, r, "GLOO_BCAST");
  hvds_result_t rc =
      hvds__backend_for(s, r, 0)->broadcast(s, e->input.data, bytes, r->root_rank, &o);
  hvds__tl_activity(rt, r, NULL);
  if (rc != HVDS_SUCCESS) return rc;
  hvds__tl_end(rt, r, x);
  hvds__entry_finish(rt, e, HVDS_SUCCESS, NULL);
  x->entries[0] = NULL;
  return HVDS_SUCCESS;
}

hvds_result_t hvds__exec_alltoall(hvds_pset_t* s, hvds_response_t* r, hvds_exec_t* x) {
  hvds_runtime_t* rt = s->rt;
  hvds_entry_t* e = x->entries[0];
  if (e == NULL) return HVDS_SUCCESS;
  hvds__tl_start(rt, r, NULL);
  const hvds_backend_t* be = hvds__backend_for(s, r, 0);
  hvds_alltoall_plan_t p;
  hvds_result_t rc = hvds__alltoall_plan(s, r, e, be->alltoallv, &p);
  if (rc != HVDS_SUCCESS) return rc;
  char* out = hvds__entry_alloc_output(e, r->nextra, p.shape, p.received);
  char* buf = out ? out : hvds__fusion_buffer(rt, p.received);
  if (buf == NULL) {
    hvds__alltoall_plan_free(&p);
    return HVDS_SYSTEM_ERROR;
  }
  hvds_coll_opts_t o = {hvds__next_tag(s), HVDS_ALGO_AUTO, 0, 0};
  hvds__tl_activity(rt, r, "GLOO_ALLTOALL");
  rc = be->alltoallv(s, e->input.data, p.send_bytes, p.send_off, buf, p.recv_bytes, p.recv_off, &o);
  hvds__tl_activity(rt, r, NULL);
  if (rc == HVDS_SUCCESS) {
    hvds__alltoall_keep_splits(rt, e, p.recv_splits, s->n);
    hvds__tl_end(rt, r, x);
    hvds__entry_finish(rt, e, out ? HVDS_SUCCESS : HVDS_SYSTEM_ERROR,
                       out ? NULL : "alltoall: the output allocator returned NULL");
    x->entries[0] = NULL;
  }
  hvds__alltoall_plan_free(&p);
  return rc;
}

hvds_result_t hvds__exec_reducescatter(hvds_pset_t* s, hvds_response_t* r, hvds_exec_t* x) {
  hvds_runtime_t* rt = s->rt;
  /* Grouped reducescatters arrive as separate responses; each runs on its own. */
  hvds_entry_t* e = x->entries[0];
  if (e == NULL) return HVDS_SUCCESS;
  int32_t n = s->n;
  size_t esz = hvds__dtype_bytes((hvds_dtype_t)r->dtype);
  size_t total = (size_t)r->sizes[0];
  size_t* counts = calloc((size_t)n, sizeof(size_t));
  char* buf = hvds__fusion_buffer(rt, total * esz);
  if (counts == NULL || buf == NULL) {
    free(counts);
    return HVDS_SYSTEM_ERROR;
  }
  int64_t shape[HVDS_MAX_DIMS];
  int32_t ndim = hvds__reducescatter_split(r, n, s->my_rank, counts, shape);
  size_t my_off = 0;
  for (int32_t k = 0; k < s->my_rank; k++) my_off += counts[k];
  hvds__tl_start(rt, r, NULL);
  hvds__copy(buf, e->input.data, total * esz);
  hvds__scale(buf, total, (hvds_dtype_t)r->dtype, r->prescale);
  hvds_coll_opts_t o = {hvds__next_tag(s), HVDS_ALGO_AUTO, 0, 0};
  hvds__tl_activity(rt, r, "GLOO_REDUCESCATTER");
  hvds_result_t rc = hvds__backend_for(s, r, 0)->reducescatter(
      s, buf, counts, (hvds_dtype_t)r->dtype,
      r->reduce_op == HVDS_AVERAGE ? HVDS_SUM : r->reduce_op, &o);
  hvds__tl_activity(rt, r, NULL);
  if (rc != HVDS_SUCCESS) {
    free(counts);
    return rc;
  }
  size_t mine = counts[s->my_rank];
  char* out = hvds__entry_alloc_output(e, ndim, shape, mine * esz);
  if (out) {
    hvds__copy(out, buf + my_off * esz, mine * esz);
    hvds__post_scale(s, r, out, mine, (hvds_dtype_t)r->dtype);
  }
  free(counts);
  hvds__tl_end(rt, r, x);
  hvds__entry_finish(rt, e, out ? HVDS_SUCCESS : HVDS_SYSTEM_ERROR,
                     out ? NULL : "reducescatter: the output allocator returned NULL");
  x->entries[0] = NULL;
  return HVDS_SUCCESS;
}
