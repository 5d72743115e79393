/* The NCCL backend's per-device context: the stream, and the completion thread that turns
 * completion events into done callbacks so the coordinator never waits for the GPU.
 *
 * The thread waits on the oldest pending operation only: every operation of a context runs on
 * its one stream, so they complete in enqueue order. It polls the event (cudaEventQuery) with a
 * backoff from 2 us to 1 ms, checking meanwhile the communicator's asynchronous error
 * (ncclCommGetAsyncError) and the timeout; a failure aborts the communicator, which lets the
 * stream move on, and fails the operations of that communicator behind it. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nccl_internal.h"
#include "clock.h"

int hvds__nccl_version(void) {
  int v = 0;
  return ncclGetVersion(&v) == ncclSuccess ? v : 0;
}

/* The communicator of p that failed first checked (comm, then also), or comm. */
static hvds_nccl_comm_t* failed_comm(const hvds_nccl_pending_t* p) {
  if (p->also != NULL && !atomic_load(&p->comm->failed) && atomic_load(&p->also->failed))
    return p->also;
  return p->comm;
}

static void abort_all(hvds_nccl_pending_t* p) {
  hvds__nccl_comm_abort(p->comm);  // unblocks the stream; then the event completes
  if (p->also != NULL) hvds__nccl_comm_abort(p->also);
}

/* Fails c when NCCL reports an asynchronous error on it. */
static void check_async(hvds_nccl_comm_t* c) {
  ncclResult_t async = ncclSuccess;
  pthread_mutex_lock(&c->mu);
  if (c->nccl != NULL) ncclCommGetAsyncError(c->nccl, &async);
  pthread_mutex_unlock(&c->mu);
  if (async != ncclSuccess && async != ncclInProgress)
    hvds__nccl_fail(c, hvds__nccl_result(async), "asynchronous NCCL error: %s",
                    ncclGetErrorString(async));
}

/* Polls p's event until it completes, one of its communicators fails, or the timeout passes.
 * Runs on the completion thread without the context lock. */
static hvds_result_t wait_pending(hvds_nccl_ctx_t* ctx, hvds_nccl_pending_t* p) {
  // The timeout runs from when p became the oldest: the stream ran the operations before it.
  uint64_t start = (uint64_t)hvds__now_ns();
  long sleep_ns = 2000;
  for (;;) {
    cudaError_t e = cudaEventQuery(p->ev);
    if (e == cudaSuccess) return (hvds_result_t)atomic_load(&failed_comm(p)->failed);
    if (e != cudaErrorNotReady) {
      (void)cudaGetLastError();
      hvds__nccl_fail(p->comm, HVDS_SYSTEM_ERROR, "CUDA error: %s", cudaGetErrorString(e));
      abort_all(p);
      return (hvds_result_t)atomic_load(&p->comm->failed);
    }
    if (atomic_load(&failed_comm(p)->failed)) {
      abort_all(p);
    } else {
      check_async(p->comm);
      if (p->also != NULL) check_async(p->also);
      if (!atomic_load(&failed_comm(p)->failed) && ctx->timeout_ms > 0 &&
          (uint64_t)hvds__now_ns() - start > (uint64_t)ctx->timeout_ms * 1000000ull)
        hvds__nccl_fail(p->comm, HVDS_TIMEOUT, "operation not complete after %d ms",
                        ctx->timeout_ms);
    }
    struct timespec ts = {0, sleep_ns};
    nanosleep(&ts, NULL);
    if (sleep_ns < 1000000) sleep_ns *= 2;
  }
}

static void* completion_main(void* arg) {
  hvds_nccl_ctx_t* ctx = arg;
  cudaSetDevice(ctx->device);
  pthread_mutex_lock(&ctx->mu);
  for (;;) {
    while (ctx->head == NULL && !ctx->stop) pthread_cond_wait(&ctx->work, &ctx->mu);
    if (ctx->head == NULL) break;  // stop, and nothing left
    hvds_nccl_pending_t* p = ctx->head;
    pthread_mutex_unlock(&ctx->mu);
    hvds_result_t rc = wait_pending(ctx, p);
    if (p->done)
      p->done(p->arg, rc, rc == HVDS_SUCCESS ? "" : hvds__nccl_comm_error(failed_comm(p)));
    pthread_mutex_lock(&ctx->mu);
    ctx->head = p->next;
    if (ctx->head == NULL) ctx->tail = NULL;
    p->next = ctx->free_list;
    ctx->free_list = p;
    ctx->pending--;
    pthread_cond_broadcast(&ctx->idle);  // for sync (pending 0) and comm destroy (none of its)
  }
  pthread_mutex_unlock(&ctx->mu);
  return NULL;
}

hvds_result_t hvds__nccl_track(hvds_nccl_comm_t* comm, const hvds_nccl_call_t* call) {
  return hvds__nccl_track_pair(comm, NULL, call);
}

hvds_result_t hvds__nccl_track_pair(hvds_nccl_comm_t* comm, hvds_nccl_comm_t* also,
                                    const hvds_nccl_call_t* call) {
  hvds_nccl_ctx_t* ctx = comm->ctx;
  pthread_mutex_lock(&ctx->mu);
  hvds_nccl_pending_t* p = ctx->free_list;
  if (p != NULL) ctx->free_list = p->next;
  pthread_mutex_unlock(&ctx->mu);
  if (p == NULL) {
    p = calloc(1, sizeof(*p));
    if (p == NULL) return HVDS_SYSTEM_ERROR;
    cudaError_t e = cudaEventCreateWithFlags(&p->ev, cudaEventDisableTiming);
    if (e != cudaSuccess) {
      free(p);
      HVDS_CUDA_CHECK(e);
    }
  }
  cudaError_t e = cudaEventRecord(p->ev, ctx->stream);
  if (e != cudaSuccess) {
    cudaEventDestroy(p->ev);
    free(p);
    HVDS_CUDA_CHECK(e);
  }
  p->comm = comm;
  p->also = also;
  p->done = call ? call->done : NULL;
  p->arg = call ? call->done_arg : NULL;
  p->next = NULL;
  pthread_mutex_lock(&ctx->mu);
  if (ctx->tail)
    ctx->tail->next = p;
  else
    ctx->head = p;
  ctx->tail = p;
  ctx->pending++;
  pthread_cond_signal(&ctx->work);
  pthread_mutex_unlock(&ctx->mu);
  return HVDS_SUCCESS;
}

hvds_result_t hvds__nccl_ctx_create(int device, int timeout_ms, hvds_nccl_ctx_t** out) {
  *out = NULL;
  hvds_nccl_ctx_t* ctx = calloc(1, sizeof(*ctx));
  if (ctx == NULL) return HVDS_SYSTEM_ERROR;
  ctx->device = device;
  ctx->timeout_ms = timeout_ms > 0 ? timeout_ms : 0;
  pthread_mutex_init(&ctx->mu, NULL);
  pthread_cond_init(&ctx->work, NULL);
  pthread_cond_init(&ctx->idle, NULL);
  hvds_result_t rc = HVDS_SYSTEM_ERROR;
  cudaError_t e = cudaSetDevice(device);
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    HVDS_WARN("nccl: device %d: %s", device, cudaGetErrorString(e));
    goto fail;
  }
  int prc = pthread_create(&ctx->thread, NULL, completion_main, ctx);
  if (prc != 0) {
    HVDS_WARN("nccl: starting the completion thread: %s", strerror(prc));
    goto fail;
  }
  *out = ctx;
  return HVDS_SUCCESS;
fail:
  if (ctx->stream) cudaStreamDestroy(ctx->stream);
  pthread_cond_destroy(&ctx->idle);
  pthread_cond_destroy(&ctx->work);
  pthread_mutex_destroy(&ctx->mu);
  free(ctx);
  return rc;
}

hvds_result_t hvds__nccl_ctx_sync(hvds_nccl_ctx_t* ctx) {
  pthread_mutex_lock(&ctx->mu);
  while (ctx->pending > 0) pthread_cond_wait(&ctx->idle, &ctx->mu);
  pthread_mutex_unlock(&ctx->mu);
  return HVDS_SUCCESS;
}

void hvds__nccl_ctx_destroy(hvds_nccl_ctx_t* ctx) {
  if (ctx == NULL) return;
  pthread_mutex_lock(&ctx->mu);
  ctx->stop = 1;
  pthread_cond_signal(&ctx->work);
  pthread_mutex_unlock(&ctx->mu);
  pthread_join(ctx->thread, NULL);
  while (ctx->free_list) {
    hvds_nccl_pending_t* p = ctx->free_list;
    ctx->free_list = p->next;
    cudaEventDestroy(p->ev);
    free(p);
  }
  cudaStreamDestroy(ctx->stream);
  pthread_cond_destroy(&ctx->idle);
  pthread_cond_destroy(&ctx->work);
  pthread_mutex_destroy(&ctx->mu);
  free(ctx);
}

hvds_cuda_stream_t hvds__nccl_ctx_stream(const hvds_nccl_ctx_t* ctx) {
  return (hvds_cuda_stream_t)ctx->stream;
}

int hvds__nccl_ctx_device(const hvds_nccl_ctx_t* ctx) { return ctx->device; }
