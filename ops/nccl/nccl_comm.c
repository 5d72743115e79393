/* NCCL communicators: creation with the unique id sent over the control plane, failure, abort,
 * destroy, and the job's set of them (global, local, cross, process sets). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives.h"
#include "nccl_internal.h"

hvds_result_t hvds__nccl_comm_create(hvds_nccl_ctx_t* ctx, int rank, int size,
                                     hvds_nccl_bcast_fn bcast, void* bctx, hvds_nccl_comm_t** out) {
  *out = NULL;
  if (ctx == NULL || bcast == NULL || size < 1 || rank < 0 || rank >= size)
    return HVDS_INVALID_ARGUMENT;
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  if (rank == 0) {
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) {
      // Still broadcast (zeros) so the other ranks do not wait for an id that never comes.
      HVDS_WARN("nccl: ncclGetUniqueId: %s", ncclGetErrorString(r));
    }
  }
  HVDS_CHECK(bcast(bctx, &id, sizeof id, 0));
  static const ncclUniqueId zero;
  if (memcmp(&id, &zero, sizeof id) == 0) {
    HVDS_WARN("nccl: rank 0 could not make a unique id");
    return HVDS_SYSTEM_ERROR;
  }
  hvds_nccl_comm_t* c = calloc(1, sizeof(*c));
  if (c == NULL) return HVDS_SYSTEM_ERROR;
  c->ctx = ctx;
  c->rank = rank;
  c->size = size;
  pthread_mutex_init(&c->mu, NULL);
  cudaError_t e = cudaSetDevice(ctx->device);
  ncclResult_t r =
      e == cudaSuccess ? ncclCommInitRank(&c->nccl, size, id, rank) : ncclUnhandledCudaError;
  if (r != ncclSuccess) {
    HVDS_WARN("nccl: rank %d of %d: ncclCommInitRank: %s (%s)", rank, size, ncclGetErrorString(r),
              e == cudaSuccess ? ncclGetLastError(NULL) : cudaGetErrorString(e));
    (void)cudaGetLastError();
    pthread_mutex_destroy(&c->mu);
    free(c);
    return hvds__nccl_result(r);
  }
  *out = c;
  return HVDS_SUCCESS;
}

typedef struct {
  hvds_p2p_t* p;
  uint64_t tag;
} p2p_bcast_t;

static hvds_result_t p2p_bcast(void* bctx, void* buf, size_t bytes, int root) {
  p2p_bcast_t* b = bctx;
  hvds_coll_opts_t o = {b->tag, HVDS_ALGO_AUTO, 0, 0};
  return hvds__broadcast(b->p, buf, bytes, root, &o);
}

hvds_result_t hvds__nccl_comm_create_p2p(hvds_nccl_ctx_t* ctx, hvds_p2p_t* p, uint64_t tag,
                                         hvds_nccl_comm_t** out) {
  *out = NULL;
  if (p == NULL) return HVDS_INVALID_ARGUMENT;
  p2p_bcast_t b = {p, tag};
  return hvds__nccl_comm_create(ctx, p->rank, p->size, p2p_bcast, &b, out);
}

int hvds__nccl_comm_rank(const hvds_nccl_comm_t* comm) { return comm->rank; }
int hvds__nccl_comm_size(const hvds_nccl_comm_t* comm) { return comm->size; }

hvds_result_t hvds__nccl_result(ncclResult_t r) {
  switch (r) {
    case ncclSuccess:
      return HVDS_SUCCESS;
    case ncclRemoteError:
      return HVDS_REMOTE_ERROR;
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return HVDS_INVALID_ARGUMENT;
    default:
      return HVDS_SYSTEM_ERROR;
  }
}

hvds_result_t hvds__nccl_fail(hvds_nccl_comm_t* comm, hvds_result_t status, const char* fmt, ...) {
  pthread_mutex_lock(&comm->ctx->mu);  // serializes the first failure's message
  if (atomic_load(&comm->failed) == 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(comm->error, sizeof(comm->error), fmt, ap);
    va_end(ap);
    atomic_store(&comm->failed, (int)status);
    HVDS_WARN("nccl: rank %d of %d: %s", comm->rank, comm->size, comm->error);
  }
  pthread_mutex_unlock(&comm->ctx->mu);
  return status;
}

const char* hvds__nccl_comm_error(const hvds_nccl_comm_t* comm) {
  return atomic_load(&comm->failed) ? comm->error : "";
}

void hvds__nccl_comm_abort(hvds_nccl_comm_t* comm) {
  if (comm == NULL) return;
  hvds__nccl_fail(comm, HVDS_SHUT_DOWN, "communicator aborted");
  pthread_mutex_lock(&comm->mu);
  if (comm->nccl != NULL) {
    cudaSetDevice(comm->ctx->device);
    ncclCommAbort(comm->nccl);
    comm->nccl = NULL;
  }
  pthread_mutex_unlock(&comm->mu);
}

/* Blocks until no operation of comm is queued (they all completed or failed). */
static void drain(hvds_nccl_comm_t* comm) {
  hvds_nccl_ctx_t* ctx = comm->ctx;
  pthread_mutex_lock(&ctx->mu);
  for (;;) {
    int mine = 0;
    for (hvds_nccl_pending_t* p = ctx->head; p != NULL && !mine; p = p->next)
      mine = p->comm == comm || p->also == comm;
    if (!mine) break;
    pthread_cond_wait(&ctx->idle, &ctx->mu);
  }
  pthread_mutex_unlock(&ctx->mu);
}

void hvds__nccl_comm_destroy(hvds_nccl_comm_t* comm) {
  if (comm == NULL) return;
  drain(comm);
  if (comm->nccl != NULL) {
    cudaSetDevice(comm->ctx->device);
    if (atomic_load(&comm->failed))
      ncclCommAbort(comm->nccl);  // a failed communicator may never finish a destroy
    else
      ncclCommDestroy(comm->nccl);
  }
  pthread_mutex_destroy(&comm->mu);
  free(comm);
}

/* ---- The job's communicators ---- */

typedef struct {
  int32_t id;
  hvds_nccl_comm_t* comm;
} pset_comm_t;

struct hvds_nccl_groups {
  hvds_nccl_ctx_t* ctx;
  hvds_nccl_comm_t* fixed[3]; /* global, local, cross */
  pset_comm_t* psets;         /* process sets other than 0, created on first use */
  int npsets, cap;
};

hvds_result_t hvds__nccl_groups_create(hvds_nccl_ctx_t* ctx, hvds_p2p_t* world, hvds_p2p_t* local,
                                       hvds_p2p_t* cross, uint64_t tag, hvds_nccl_groups_t** out) {
  *out = NULL;
  hvds_nccl_groups_t* g = calloc(1, sizeof(*g));
  if (g == NULL) return HVDS_SYSTEM_ERROR;
  g->ctx = ctx;
  hvds_p2p_t* views[3] = {world, local, cross};
  hvds_result_t rc = HVDS_SUCCESS;
  for (int i = 0; i < 3 && rc == HVDS_SUCCESS; i++)
    if (views[i] != NULL) rc = hvds__nccl_comm_create_p2p(ctx, views[i], tag + i, &g->fixed[i]);
  if (rc == HVDS_SUCCESS && g->fixed[0] == NULL) rc = HVDS_INVALID_ARGUMENT;  // world required
  if (rc != HVDS_SUCCESS) {
    hvds__nccl_groups_destroy(g);
    return rc;
  }
  *out = g;
  return HVDS_SUCCESS;
}

hvds_nccl_comm_t* hvds__nccl_groups_get(const hvds_nccl_groups_t* g, hvds_nccl_group_t which) {
  return (unsigned)which < 3 ? g->fixed[which] : NULL;
}

hvds_result_t hvds__nccl_groups_pset(hvds_nccl_groups_t* g, int32_t id, hvds_p2p_t* pset,
                                     uint64_t tag, hvds_nccl_comm_t** out) {
  *out = NULL;
  if (id == 0) {
    *out = g->fixed[HVDS_NCCL_GLOBAL];
    return HVDS_SUCCESS;
  }
  for (int i = 0; i < g->npsets; i++) {
    if (g->psets[i].id == id) {
      *out = g->psets[i].comm;
      return HVDS_SUCCESS;
    }
  }
  if (g->npsets == g->cap) {
    int cap = g->cap ? 2 * g->cap : 4;
    pset_comm_t* grown = realloc(g->psets, (size_t)cap * sizeof(*grown));
    if (grown == NULL) return HVDS_SYSTEM_ERROR;
    g->psets = grown;
    g->cap = cap;
  }
  hvds_nccl_comm_t* c = NULL;
  HVDS_CHECK(hvds__nccl_comm_create_p2p(g->ctx, pset, tag, &c));
  g->psets[g->npsets++] = (pset_comm_t){id, c};
  *out = c;
  return HVDS_SUCCESS;
}

void hvds__nccl_groups_remove_pset(hvds_nccl_groups_t* g, int32_t id) {
  for (int i = 0; i < g->npsets; i++) {
    if (g->psets[i].id != id) continue;
    hvds__nccl_comm_destroy(g->psets[i].comm);
    g->psets[i] = g->psets[--g->npsets];
    return;
  }
}

void hvds__nccl_groups_destroy(hvds_nccl_groups_t* g) {
  if (g == NULL) return;
  for (int i = 0; i < g->npsets; i++) hvds__nccl_comm_destroy(g->psets[i].comm);
  for (int i = 0; i < 3; i++) hvds__nccl_comm_destroy(g->fixed[i]);
  free(g->psets);
  free(g);
}
