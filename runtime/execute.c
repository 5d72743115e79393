/* Response dispatch, the fused allreduce, and the helpers every execution path shares. */
#include "execute.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "collectives.h"
#include "copy.h"
#include "device_route.h"
#include "device_staging.h"
#include "dtype.h"
#include "exec_shared.h"
#include "execute_gather.h"
#include "execute_sparse.h"
#include "fault_record.h"
#include "handle.h"
#include "log.h"
#include "p2p.h"
#include "process_set.h"
#include "reduce.h"
#include "timeline.h"

/* Completes every entry of x with one lock round per table and one wake-up. */
static void finish_all(hvds_runtime_t* rt, hvds_exec_t* x, hvds_result_t status, const char* msg) {
  for (int32_t i = 0; i < x->n; i++)  // GPU tensors one by one: each copy back can fail alone
    if (x->entries[i] && x->entries[i]->staging) {
      hvds__entry_finish(rt, x->entries[i], status, msg);
      x->entries[i] = NULL;
    }
  hvds_handle_rec_t* stack[64];
  hvds_handle_rec_t** hs = x->n <= 64 ? stack : malloc((size_t)x->n * sizeof(*hs));
  if (hs == NULL) { /* fall back to one at a time */
    for (int32_t i = 0; i < x->n; i++)
      if (x->entries[i]) hvds__entry_finish(rt, x->entries[i], status, msg);
    memset(x->entries, 0, (size_t)x->n * sizeof(x->entries[0]));
    return;
  }
  pthread_mutex_lock(&rt->qmu);
  for (int32_t i = 0; i < x->n; i++) {
    hvds_entry_t* e = x->entries[i];
    hs[i] = e ? e->handle : NULL;
    if (e == NULL) continue;
    hvds_pset_t* s = rt->psets[e->process_set];
    if (s) hvds__name_map_remove_if(&s->inflight, e->name, e);
  }
  pthread_mutex_unlock(&rt->qmu);
  hvds__handle_complete_many(rt, hs, x->n, status, msg);
  for (int32_t i = 0; i < x->n; i++) {
    hvds_entry_t* e = x->entries[i];
    hvds__entry_free(e);
    x->entries[i] = NULL;
  }
  if (hs != stack) free(hs);
}

/* A fused allreduce by a backend that moves each tensor from its input to its output itself
 * (the host's shared segment), with no fusion buffer between. */
static hvds_result_t allreduce_pieces(const hvds_backend_t* be, hvds_pset_t* s, hvds_response_t* r,
                                      hvds_exec_t* x) {
  hvds_runtime_t* rt = s->rt;
  hvds_dtype_t dt = (hvds_dtype_t)r->dtype;
  size_t esz = hvds__dtype_bytes(dt);
  hvds_coll_piece_t stack[64], *pc = x->n <= 64 ? stack : malloc((size_t)x->n * sizeof *pc);
  if (pc == NULL) {
    finish_all(rt, x, HVDS_SYSTEM_ERROR, "out of memory for the fused allreduce's tensor list");
    return HVDS_SUCCESS; /* as a failed fusion buffer: the other ranks fail in the collective */
  }
  for (int32_t i = 0; i < x->n; i++) {
    hvds_entry_t* e = x->entries[i];  // NULL: this rank joined; it contributes zeros
    pc[i] = (hvds_coll_piece_t){e ? e->input.data : NULL, e ? e->output.data : NULL,
                                (size_t)r->sizes[i] * esz};
  }
  hvds__tl_activity(rt, r, "SHM_ALLREDUCE");
  hvds_reduce_op_t op = r->reduce_op == HVDS_AVERAGE ? HVDS_SUM : r->reduce_op;
  hvds_result_t rc = be->allreduce_pieces(s, pc, x->n, dt, op);
  hvds__tl_activity(rt, r, NULL);
  if (pc != stack) free(pc);
  if (rc != HVDS_SUCCESS) return rc;
  for (int32_t i = 0; i < x->n; i++)
    if (x->entries[i]) hvds__post_scale(s, r, x->entries[i]->output.data, (size_t)r->sizes[i], dt);
  hvds__tl_end(rt, r, x);
  finish_all(rt, x, HVDS_SUCCESS, NULL);
  return HVDS_SUCCESS;
}

/* Adasum over the set's own point-to-point communicator, each fused tensor on its own. */
static hvds_result_t allreduce_adasum(hvds_pset_t* s, hvds_response_t* r, void* buf, uint64_t tag) {
  size_t stack[64], *counts = r->nsizes <= 64 ? stack : malloc((size_t)r->nsizes * sizeof *counts);
  if (counts == NULL) return hvds__coll_nomem(s->comm, "Adasum's tensor list");
  for (int32_t i = 0; i < r->nsizes; i++) counts[i] = (size_t)r->sizes[i];
  hvds_result_t rc =
      hvds__allreduce_adasum(s->comm, buf, counts, r->nsizes, (hvds_dtype_t)r->dtype, tag);
  if (counts != stack) free(counts);
  return rc;
}

static hvds_result_t exec_allreduce(hvds_pset_t* s, hvds_response_t* r, hvds_exec_t* x) {
  hvds_runtime_t* rt = s->rt;
  size_t esz = hvds__dtype_bytes((hvds_dtype_t)r->dtype);
  size_t total = 0;
  for (int32_t i = 0; i < r->nsizes; i++) total += (size_t)r->sizes[i];
  hvds_coll_opts_t o = {hvds__next_tag(s), (hvds_algo_t)rt->allreduce_algo, 0, 0};
  o.rhd_max_bytes = hvds__rhd_max(rt);
  o.chunk_bytes = hvds__ring_chunk(rt, total * esz, s->n);
  const hvds_backend_t* be = hvds__backend_for(s, r, total * esz);
  if (rt->timeline) {
    char args[160];
    const char* algo = r->reduce_op == HVDS_ADASUM ? "adasum"
                       : be == &hvds__backend_flat
                           ? hvds__allreduce_choice(s->comm, total * esz, &o)
                           : be->name;
    snprintf(args, sizeof(args), "{\"algorithm\":\"%s\",\"fused_tensors\":%d,\"bytes\":%zu}", algo,
             r->nnames, total * esz);
    hvds__tl_start(rt, r, args);
  }

  void* buf;
  hvds_entry_t* e0 = x->entries[0];
  int single = x->n == 1 && e0 != NULL;
  int adasum = r->reduce_op == HVDS_ADASUM;
  if (!single && r->prescale == 1.0 && be->allreduce_pieces && !adasum)
    return allreduce_pieces(be, s, r, x);
  if (single) {
    /* No fusion copy: reduce in the caller's output. */
    buf = e0->output.data;
    if (buf != e0->input.data && total) hvds__copy(buf, e0->input.data, total * esz);
  } else {
    buf = hvds__fusion_buffer(rt, total * esz);
    if (buf == NULL) {
      finish_all(rt, x, HVDS_SYSTEM_ERROR, "out of memory allocating the fusion buffer");
      return HVDS_SUCCESS; /* this rank sits the collective out: the others time out in it */
    }
    hvds__tl_activity(rt, r, "MEMCPY_IN_FUSION_BUFFER");
    size_t off = 0;
    for (int32_t i = 0; i < x->n; i++) {
      size_t b = (size_t)r->sizes[i] * esz;
      if (x->entries[i])
        hvds__copy((char*)buf + off, x->entries[i]->input.data, b);
      else
        memset((char*)buf + off, 0, b); /* joined rank contributes zeros */
      off += b;
    }
    hvds__tl_activity(rt, r, NULL);
  }
  hvds__scale(buf, total, (hvds_dtype_t)r->dtype, r->prescale);
  hvds__tl_activity(rt, r, "GLOO_ALLREDUCE");
  hvds_reduce_op_t op = r->reduce_op == HVDS_AVERAGE ? HVDS_SUM : r->reduce_op;
  hvds_result_t rc = adasum ? allreduce_adasum(s, r, buf, o.tag)
                            : be->allreduce(s, buf, total, (hvds_dtype_t)r->dtype, op, &o);
  hvds__tl_activity(rt, r, NULL);
  if (rc != HVDS_SUCCESS) return rc;
  hvds__post_scale(s, r, buf, total, (hvds_dtype_t)r->dtype);
  if (!single) {
    hvds__tl_activity(rt, r, "MEMCPY_OUT_FUSION_BUFFER");
    size_t off = 0;
    for (int32_t i = 0; i < x->n; i++) {
      size_t b = (size_t)r->sizes[i] * esz;
      if (x->entries[i]) hvds__copy(x->entries[i]->output.data, (char*)buf + off, b);
      off += b;
    }
    hvds__tl_activity(rt, r, NULL);
  }
  hvds__tl_end(rt, r, x);
  finish_all(rt, x, HVDS_SUCCESS, NULL);
  return HVDS_SUCCESS;
}

static hvds_result_t exec_join(hvds_pset_t* s, hvds_response_t* r, hvds_exec_t* x) {
  hvds_runtime_t* rt = s->rt;
  hvds_entry_t* e = s->join_entry;
  s->joined = 0;
  s->join_entry = NULL;
  if (e) {
    hvds__name_map_remove(&s->pending, e->name);
    pthread_mutex_lock(&rt->hmu);
    e->handle->join_rank = r->last_joined_rank;
    pthread_mutex_unlock(&rt->hmu);
    hvds__entry_finish(rt, e, HVDS_SUCCESS, NULL);
  }
  x->entries[0] = NULL;
  return HVDS_SUCCESS;
}

hvds_result_t hvds__execute(hvds_pset_t* s, hvds_response_t* r) {
  hvds_runtime_t* rt = s->rt;
  hvds_entry_t* stack[64];
  hvds_exec_t x = {r->nnames <= 64 ? stack : calloc((size_t)r->nnames, sizeof(void*)), r->nnames};
  if (x.entries == NULL) return HVDS_SYSTEM_ERROR;
  for (int32_t i = 0; i < r->nnames; i++)
    x.entries[i] = r->type == HVDS_MSG_JOIN ? NULL : hvds__name_map_remove(&s->pending, r->names[i]);
  for (int32_t i = 0; i < x.n; i++) {  // staged GPU tensors: their copies in must have landed
    hvds_result_t waited = x.entries[i] ? hvds__staging_wait(x.entries[i], rt->rank, s->comm->error,
                                                             sizeof(s->comm->error))
                                        : HVDS_SUCCESS;
    if (waited != HVDS_SUCCESS) {  // this rank's GPU failed: the runtime stops, naming it
      finish_all(rt, &x, waited, s->comm->error);
      if (x.entries != stack) free(x.entries);
      return waited;
    }
  }

  hvds_result_t rc = HVDS_SUCCESS;
  int whole = r->type == HVDS_MSG_ALLREDUCE || r->type == HVDS_MSG_ALLGATHER ||
              r->type == HVDS_MSG_REDUCESCATTER || r->type == HVDS_MSG_BROADCAST ||
              r->type == HVDS_MSG_ALLTOALL;
  const hvds_backend_t* runner = whole ? hvds__backend_for(s, r, 0) : NULL;
  if (runner != NULL && runner->run != NULL)  // a backend that runs the response itself
    rc = runner->run(s, r, &x);
  else
    switch (r->type) {
      case HVDS_MSG_ERROR:
        finish_all(rt, &x, HVDS_PRECONDITION_ERROR, r->error);
        break;
      case HVDS_MSG_ALLREDUCE:
        rc = exec_allreduce(s, r, &x);
        break;
      case HVDS_MSG_ALLGATHER:
        rc = hvds__exec_allgather(s, r, &x);
        break;
      case HVDS_MSG_BROADCAST:
        rc = hvds__exec_broadcast(s, r, &x);
        break;
      case HVDS_MSG_ALLTOALL:
        rc = hvds__exec_alltoall(s, r, &x);
        break;
      case HVDS_MSG_REDUCESCATTER:
        rc = hvds__exec_reducescatter(s, r, &x);
        break;
      case HVDS_MSG_SPARSE_ALLREDUCE:
        rc = hvds__exec_sparse_allreduce(s, r, &x);
        break;
      case HVDS_MSG_BARRIER: {
        hvds_coll_opts_t o = {hvds__next_tag(s), HVDS_ALGO_AUTO, 0, 0};
        rc = hvds__backend_for(s, r, 0)->barrier(s, &o);
        if (rc == HVDS_SUCCESS) finish_all(rt, &x, HVDS_SUCCESS, NULL);
        break;
      }
      case HVDS_MSG_JOIN:
        rc = exec_join(s, r, &x);
        break;
      case HVDS_MSG_PS_ADD:
        rc = hvds__exec_ps_add(s, r, &x);
        break;
      case HVDS_MSG_PS_REMOVE:
        rc = hvds__exec_ps_remove(s, r, &x);
        break;
      default:
        finish_all(rt, &x, HVDS_INTERNAL_ERROR, "unknown response type");
    }
  if (rc != HVDS_SUCCESS) {
    /* Communication failed: these entries fail with the transport's message. */
    hvds__record_fault(s, rc);
    char msg[1200];
    snprintf(msg, sizeof(msg), "%s failed. %s", hvds__msg_type_name(r->type), rt->fatal);
    finish_all(rt, &x, rc, msg);
  }
  if (x.entries != stack) free(x.entries);
  return rc;
}
