/* What the files of ops/nccl/ share: the context and communicator structs, the completion
 * tracking, and the mapping of NCCL results. The only place NCCL's header is included. */
#ifndef HVDS_NCCL_INTERNAL_H_
#define HVDS_NCCL_INTERNAL_H_

#include <nccl.h>
#include <pthread.h>

#include "atomics.h"
#include "cuda_check.h"
#include "nccl_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One enqueued operation, from its completion event to its callback. */
typedef struct hvds_nccl_pending {
  cudaEvent_t ev;         /* recorded after the operation's last stream work */
  hvds_nccl_comm_t* comm; /* whose failure fails it */
  hvds_nccl_comm_t* also; /* a second communicator of the operation (hierarchical), or NULL */
  hvds_nccl_done_fn done; /* may be NULL */
  void* arg;
  struct hvds_nccl_pending* next; /* queue or free list */
} hvds_nccl_pending_t;

struct hvds_nccl_ctx {
  int device;                /* CUDA device of the stream and every communicator */
  int timeout_ms;            /* 0: none */
  cudaStream_t stream;       /* all work of the context, in call order */
  pthread_t thread;          /* the completion thread */
  pthread_mutex_t mu;        /* guards everything below */
  pthread_cond_t work;       /* signalled when the queue gains an entry or stop is set */
  pthread_cond_t idle;       /* broadcast after every callback */
  hvds_nccl_pending_t* head; /* oldest pending operation (completes first: one stream) */
  hvds_nccl_pending_t* tail;
  hvds_nccl_pending_t* free_list; /* finished records, their events kept for reuse */
  size_t pending;                 /* operations enqueued and not yet called back */
  int stop;                       /* set by destroy; the thread exits once the queue is empty */
};

struct hvds_nccl_comm {
  hvds_nccl_ctx_t* ctx;
  ncclComm_t nccl;    /* NULL once aborted; read and replaced under mu */
  pthread_mutex_t mu; /* held by the caller's enqueue and by abort: the handle's lifetime */
  int rank, size;
  HVDS_ATOMIC(int) failed; /* hvds_result_t of the failure, 0 while the communicator works */
  char error[384];   /* its message, written once before failed is set */
};

/* Marks comm failed with status and message (the first failure wins) and returns status. */
hvds_result_t hvds__nccl_fail(hvds_nccl_comm_t* comm, hvds_result_t status, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Maps an NCCL result to ours (ncclRemoteError -> HVDS_REMOTE_ERROR, argument and usage
 * errors -> HVDS_INVALID_ARGUMENT, the rest -> HVDS_SYSTEM_ERROR). */
hvds_result_t hvds__nccl_result(ncclResult_t r);
/* Records the completion event of the work just enqueued for comm on the context's stream and
 * queues it for the completion thread. */
hvds_result_t hvds__nccl_track(hvds_nccl_comm_t* comm, const hvds_nccl_call_t* call);
/* As hvds__nccl_track for an operation over two communicators of the context: a failure or
 * timeout of either fails it and aborts both (the stream waits on both's kernels). */
hvds_result_t hvds__nccl_track_pair(hvds_nccl_comm_t* comm, hvds_nccl_comm_t* also,
                                    const hvds_nccl_call_t* call);

/* NCCL calls inside an enqueue: a failure fails the communicator and returns. */
#define HVDS_NCCL_CHECK(comm, call)                                                            \
  do {                                                                                         \
    ncclResult_t hvds_nc_rc_ = (call);                                                         \
    if (hvds_nc_rc_ != ncclSuccess && hvds_nc_rc_ != ncclInProgress)                           \
      return hvds__nccl_fail((comm), hvds__nccl_result(hvds_nc_rc_), "%s: %s (%s)", #call,     \
                             ncclGetErrorString(hvds_nc_rc_), ncclGetLastError((comm)->nccl)); \
  } while (0)

#ifdef __cplusplus
}
#endif
#endif /* HVDS_NCCL_INTERNAL_H_ */
