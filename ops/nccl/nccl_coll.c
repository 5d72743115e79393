/* The NCCL backend's collectives (nccl_backend.h). Each entry point takes the communicator's
 * lock, makes the stream wait for the ready events, enqueues its kernels and NCCL calls, and
 * hands a completion event to the completion thread (nccl_ctx.c). Nothing here waits for the
 * GPU. Scaling follows runtime/execute.c and exec_shared.c: prescale the input, reduce, then
 * postscale (and 1/size for Average), with the cuda/ kernels, so the arithmetic is
 * ops/reduce.c's. */
#include <stdlib.h>

#include "nccl_internal.h"

static int map_dtype(hvds_dtype_t dt, ncclDataType_t* out) {
  switch (dt) {
    case HVDS_UINT8:
    case HVDS_BOOL:
      *out = ncclUint8;
      return 1;
    case HVDS_INT8:
      *out = ncclInt8;
      return 1;
    case HVDS_INT32:
      *out = ncclInt32;
      return 1;
    case HVDS_INT64:
      *out = ncclInt64;
      return 1;
    case HVDS_FLOAT16:
      *out = ncclFloat16;
      return 1;
    case HVDS_FLOAT32:
      *out = ncclFloat32;
      return 1;
    case HVDS_FLOAT64:
      *out = ncclFloat64;
      return 1;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
    case HVDS_BFLOAT16:
      *out = ncclBfloat16;
      return 1;
#endif
    default:
      return 0;  // int16, uint16: no NCCL type
  }
}

/* The NCCL op for (dtype, op); bool (0 or 1 bytes) reduces with max for or and min for and. */
static int map_op(hvds_dtype_t dt, hvds_reduce_op_t op, ncclRedOp_t* out) {
  int is_bool = dt == HVDS_BOOL;
  switch (op) {
    case HVDS_SUM:
    case HVDS_AVERAGE:
      *out = is_bool ? ncclMax : ncclSum;
      return 1;
    case HVDS_PRODUCT:
      *out = is_bool ? ncclMin : ncclProd;
      return 1;
    case HVDS_MIN:
      *out = ncclMin;
      return 1;
    case HVDS_MAX:
      *out = ncclMax;
      return 1;
    default:
      return 0;
  }
}

static hvds_result_t map_reduction(hvds_dtype_t dt, hvds_reduce_op_t op, ncclDataType_t* t,
                                   ncclRedOp_t* o) {
  if (!map_dtype(dt, t) || !map_op(dt, op, o)) {
    HVDS_WARN("nccl: no NCCL reduction for dtype %d op %d", (int)dt, (int)op);
    return HVDS_NOT_SUPPORTED;
  }
  return HVDS_SUCCESS;
}

/* The factor applied after the reduction: postscale, and 1/size for Average. */
static double post_factor(const hvds_nccl_comm_t* comm, hvds_reduce_op_t op, double postscale) {
  return op == HVDS_AVERAGE ? postscale / (double)comm->size : postscale;
}

/* Starts an enqueue: on success comm->mu is held, the device is current, and the stream waits
 * for the ready events. */
static hvds_result_t begin(hvds_nccl_comm_t* comm, const hvds_nccl_call_t* call) {
  if (comm == NULL) return HVDS_INVALID_ARGUMENT;
  pthread_mutex_lock(&comm->mu);
  int failed = atomic_load(&comm->failed);
  if (failed != 0 || comm->nccl == NULL) {
    pthread_mutex_unlock(&comm->mu);
    HVDS_DEBUG("nccl: call on a failed communicator: %s", comm->error);
    return failed != 0 ? (hvds_result_t)failed : HVDS_SHUT_DOWN;
  }
  cudaError_t e = cudaSetDevice(comm->ctx->device);
  for (int i = 0; e == cudaSuccess && call != NULL && i < call->nready; i++)
    if (call->ready_events[i] != NULL)
      e = cudaStreamWaitEvent(comm->ctx->stream, (cudaEvent_t)call->ready_events[i], 0);
  if (e != cudaSuccess) {
    pthread_mutex_unlock(&comm->mu);
    HVDS_CUDA_CHECK(e);
  }
  return HVDS_SUCCESS;
}

/* Ends an enqueue begun by begin(): tracks the operation if rc is success, releases the lock. */
static hvds_result_t end(hvds_nccl_comm_t* comm, const hvds_nccl_call_t* call, hvds_result_t rc) {
  if (rc == HVDS_SUCCESS) rc = hvds__nccl_track(comm, call);
  pthread_mutex_unlock(&comm->mu);
  return rc;
}

/* ---- Allreduce ---- */

static hvds_result_t enqueue_allreduce(hvds_nccl_comm_t* comm, const void* sendbuf, void* recvbuf,
                                       size_t count, hvds_dtype_t dt, hvds_reduce_op_t op,
                                       double prescale, double postscale) {
  ncclDataType_t t;
  ncclRedOp_t o;
  HVDS_CHECK(map_reduction(dt, op, &t, &o));
  hvds_cuda_stream_t s = (hvds_cuda_stream_t)comm->ctx->stream;
  const void* src = sendbuf;
  if (prescale != 1.0 && count > 0) {
    if (sendbuf != recvbuf) {  // copy and scale in one pass
      hvds_cuda_buf_t in = {(void*)sendbuf, count};
      HVDS_CHECK(hvds__cuda_pack(&in, 1, recvbuf, dt, prescale, s));
    } else {
      HVDS_CHECK(hvds__cuda_scale(recvbuf, count, dt, prescale, s));
    }
    src = recvbuf;
  }
  HVDS_NCCL_CHECK(comm, ncclAllReduce(src, recvbuf, count, t, o, comm->nccl, comm->ctx->stream));
  return hvds__cuda_scale(recvbuf, count, dt, post_factor(comm, op, postscale), s);
}

hvds_result_t hvds__nccl_allreduce(hvds_nccl_comm_t* comm, const void* sendbuf, void* recvbuf,
                                   size_t count, hvds_dtype_t dtype, hvds_reduce_op_t op,
                                   double prescale, double postscale,
                                   const hvds_nccl_call_t* call) {
  HVDS_CHECK(begin(comm, call));
  return end(comm, call,
             enqueue_allreduce(comm, sendbuf, recvbuf, count, dtype, op, prescale, postscale));
}

static hvds_result_t enqueue_fused(hvds_nccl_comm_t* comm, const hvds_cuda_buf_t* inputs,
                                   const hvds_cuda_buf_t* outputs, int n, void* d_fusion,
                                   hvds_dtype_t dt, hvds_reduce_op_t op, double prescale,
                                   double postscale) {
  ncclDataType_t t;
  ncclRedOp_t o;
  HVDS_CHECK(map_reduction(dt, op, &t, &o));
  size_t total = 0;
  for (int i = 0; i < n; i++) {
    if (outputs[i].count != inputs[i].count) return HVDS_INVALID_ARGUMENT;
    total += inputs[i].count;
  }
  hvds_cuda_stream_t s = (hvds_cuda_stream_t)comm->ctx->stream;
  HVDS_CHECK(hvds__cuda_pack(inputs, n, d_fusion, dt, prescale, s));
  HVDS_NCCL_CHECK(comm,
                  ncclAllReduce(d_fusion, d_fusion, total, t, o, comm->nccl, comm->ctx->stream));
  return hvds__cuda_unpack(d_fusion, outputs, n, dt, post_factor(comm, op, postscale), s);
}

hvds_result_t hvds__nccl_allreduce_fused(hvds_nccl_comm_t* comm, const hvds_cuda_buf_t* inputs,
                                         const hvds_cuda_buf_t* outputs, int n, void* d_fusion,
                                         hvds_dtype_t dtype, hvds_reduce_op_t op, double prescale,
                                         double postscale, const hvds_nccl_call_t* call) {
  if (n < 0 || (n > 0 && (inputs == NULL || outputs == NULL || d_fusion == NULL)))
    return HVDS_INVALID_ARGUMENT;
  HVDS_CHECK(begin(comm, call));
  return end(comm, call,
             enqueue_fused(comm, inputs, outputs, n, d_fusion, dtype, op, prescale, postscale));
}

/* ---- Hierarchical allreduce ---- */

/* Packed with the prescale and padded with zeros to a multiple of L = local's size; block i of
 * the fusion buffer reduced over the host into local rank i (ncclReduceScatter), over the
 * hosts (ncclAllReduce on cross), gathered back on the host (ncclAllGather); unpacked with the
 * postscale, Average dividing by L x the hosts. Padding is never unpacked. */
static hvds_result_t enqueue_hierarchical(hvds_nccl_comm_t* local, hvds_nccl_comm_t* cross,
                                          const hvds_cuda_buf_t* inputs,
                                          const hvds_cuda_buf_t* outputs, int n, void* d_fusion,
                                          hvds_dtype_t dt, hvds_reduce_op_t op, double prescale,
                                          double postscale) {
  ncclDataType_t t;
  ncclRedOp_t o;
  HVDS_CHECK(map_reduction(dt, op, &t, &o));
  size_t total = 0, esz = hvds__dtype_bytes(dt), L = (size_t)local->size;
  for (int i = 0; i < n; i++) {
    if (outputs[i].count != inputs[i].count) return HVDS_INVALID_ARGUMENT;
    total += inputs[i].count;
  }
  size_t block = (total + L - 1) / L;
  cudaStream_t cs = local->ctx->stream;
  HVDS_CHECK(hvds__cuda_pack(inputs, n, d_fusion, dt, prescale, (hvds_cuda_stream_t)cs));
  if (block * L > total)
    HVDS_CUDA_CHECK(
        cudaMemsetAsync((char*)d_fusion + total * esz, 0, (block * L - total) * esz, cs));
  char* mine = (char*)d_fusion + (size_t)local->rank * block * esz;
  HVDS_NCCL_CHECK(local, ncclReduceScatter(d_fusion, mine, block, t, o, local->nccl, cs));
  HVDS_NCCL_CHECK(cross, ncclAllReduce(mine, mine, block, t, o, cross->nccl, cs));
  HVDS_NCCL_CHECK(local, ncclAllGather(mine, d_fusion, block, t, local->nccl, cs));
  double f = op == HVDS_AVERAGE ? postscale / ((double)L * cross->size) : postscale;
  return hvds__cuda_unpack(d_fusion, outputs, n, dt, f, (hvds_cuda_stream_t)cs);
}

hvds_result_t hvds__nccl_allreduce_hierarchical(hvds_nccl_comm_t* local, hvds_nccl_comm_t* cross,
                                                const hvds_cuda_buf_t* inputs,
                                                const hvds_cuda_buf_t* outputs, int n,
                                                void* d_fusion, hvds_dtype_t dtype,
                                                hvds_reduce_op_t op, double prescale,
                                                double postscale, const hvds_nccl_call_t* call) {
  if (local == NULL || cross == NULL || local->ctx != cross->ctx || d_fusion == NULL || n < 0 ||
      (n > 0 && (inputs == NULL || outputs == NULL)))
    return HVDS_INVALID_ARGUMENT;
  HVDS_CHECK(begin(local, call));  // local's lock, then cross's: the one place both are held
  pthread_mutex_lock(&cross->mu);
  hvds_result_t rc = (hvds_result_t)atomic_load(&cross->failed);
  if (rc == HVDS_SUCCESS && cross->nccl == NULL) rc = HVDS_SHUT_DOWN;
  if (rc == HVDS_SUCCESS)
    rc = enqueue_hierarchical(local, cross, inputs, outputs, n, d_fusion, dtype, op, prescale,
                              postscale);
  if (rc == HVDS_SUCCESS) rc = hvds__nccl_track_pair(local, cross, call);
  pthread_mutex_unlock(&cross->mu);
  pthread_mutex_unlock(&local->mu);
  return rc;
}

/* ---- Reduce-scatter ---- */

static hvds_result_t enqueue_reducescatter(hvds_nccl_comm_t* comm, void* buf, void* recvbuf,
                                           const size_t* counts, hvds_dtype_t dt,
                                           hvds_reduce_op_t op, double prescale, double postscale) {
  ncclDataType_t t;
  ncclRedOp_t o;
  HVDS_CHECK(map_reduction(dt, op, &t, &o));
  size_t esz = hvds__dtype_bytes(dt), total = 0;
  int equal = 1;
  for (int r = 0; r < comm->size; r++) {
    total += counts[r];
    equal &= counts[r] == counts[0];
  }
  hvds_cuda_stream_t s = (hvds_cuda_stream_t)comm->ctx->stream;
  cudaStream_t cs = comm->ctx->stream;
  HVDS_CHECK(hvds__cuda_scale(buf, total, dt, prescale, s));
  char* base = buf;
  if (equal) {
    HVDS_NCCL_CHECK(comm, ncclReduceScatter(buf, recvbuf, counts[0], t, o, comm->nccl, cs));
  } else {
    HVDS_NCCL_CHECK(comm, ncclGroupStart());
    size_t off = 0;
    for (int r = 0; r < comm->size; r++) {
      char* block = base + off * esz;
      if (counts[r] > 0) {
        ncclResult_t nr = ncclReduce(block, r == comm->rank ? recvbuf : block, counts[r], t, o, r,
                                     comm->nccl, cs);
        if (nr != ncclSuccess) {
          ncclGroupEnd();
          HVDS_NCCL_CHECK(comm, nr);
        }
      }
      off += counts[r];
    }
    HVDS_NCCL_CHECK(comm, ncclGroupEnd());
  }
  return hvds__cuda_scale(recvbuf, counts[comm->rank], dt, post_factor(comm, op, postscale), s);
}

hvds_result_t hvds__nccl_reducescatter(hvds_nccl_comm_t* comm, void* buf, void* recvbuf,
                                       const size_t* counts, hvds_dtype_t dtype,
                                       hvds_reduce_op_t op, double prescale, double postscale,
                                       const hvds_nccl_call_t* call) {
  if (counts == NULL) return HVDS_INVALID_ARGUMENT;
  HVDS_CHECK(begin(comm, call));
  return end(comm, call,
             enqueue_reducescatter(comm, buf, recvbuf, counts, dtype, op, prescale, postscale));
}

/* ---- Data movement ---- */

static hvds_result_t enqueue_allgather(hvds_nccl_comm_t* comm, const void* sendbuf, void* recvbuf,
                                       const size_t* bytes) {
  cudaStream_t cs = comm->ctx->stream;
  int equal = 1;
  for (int r = 0; r < comm->size; r++) equal &= bytes[r] == bytes[0];
  if (equal) {
    HVDS_NCCL_CHECK(comm, ncclAllGather(sendbuf, recvbuf, bytes[0], ncclInt8, comm->nccl, cs));
    return HVDS_SUCCESS;
  }
  HVDS_NCCL_CHECK(comm, ncclGroupStart());
  size_t off = 0;
  for (int r = 0; r < comm->size; r++) {
    char* dst = (char*)recvbuf + off;
    if (bytes[r] > 0) {
      ncclResult_t nr = ncclBroadcast(r == comm->rank ? sendbuf : dst, dst, bytes[r], ncclInt8, r,
                                      comm->nccl, cs);
      if (nr != ncclSuccess) {
        ncclGroupEnd();
        HVDS_NCCL_CHECK(comm, nr);
      }
    }
    off += bytes[r];
  }
  HVDS_NCCL_CHECK(comm, ncclGroupEnd());
  return HVDS_SUCCESS;
}

hvds_result_t hvds__nccl_allgather(hvds_nccl_comm_t* comm, const void* sendbuf, void* recvbuf,
                                   const size_t* bytes, const hvds_nccl_call_t* call) {
  if (bytes == NULL) return HVDS_INVALID_ARGUMENT;
  HVDS_CHECK(begin(comm, call));
  return end(comm, call, enqueue_allgather(comm, sendbuf, recvbuf, bytes));
}

static hvds_result_t enqueue_broadcast(hvds_nccl_comm_t* comm, void* buf, size_t bytes, int root) {
  if (root < 0 || root >= comm->size) return HVDS_INVALID_ARGUMENT;
  HVDS_NCCL_CHECK(comm,
                  ncclBroadcast(buf, buf, bytes, ncclInt8, root, comm->nccl, comm->ctx->stream));
  return HVDS_SUCCESS;
}

hvds_result_t hvds__nccl_broadcast(hvds_nccl_comm_t* comm, void* buf, size_t bytes, int root,
                                   const hvds_nccl_call_t* call) {
  HVDS_CHECK(begin(comm, call));
  return end(comm, call, enqueue_broadcast(comm, buf, bytes, root));
}

/* Grouped ncclSend/ncclRecv of byte blocks (see hvds__nccl_alltoallv), or of one element of
 * type t per rank when sbytes is NULL (the u64 exchange). */
static hvds_result_t enqueue_sendrecv(hvds_nccl_comm_t* comm, const void* sendbuf,
                                      const size_t* sbytes, const size_t* soff, void* recvbuf,
                                      const size_t* rbytes, const size_t* roff) {
  cudaStream_t cs = comm->ctx->stream;
  HVDS_NCCL_CHECK(comm, ncclGroupStart());
  ncclResult_t nr = ncclSuccess;
  for (int r = 0; r < comm->size && nr == ncclSuccess; r++) {
    if (sbytes == NULL) {
      nr = ncclSend((const uint64_t*)sendbuf + r, 1, ncclUint64, r, comm->nccl, cs);
      if (nr == ncclSuccess)
        nr = ncclRecv((uint64_t*)recvbuf + r, 1, ncclUint64, r, comm->nccl, cs);
      continue;
    }
    if (sbytes[r] > 0)
      nr = ncclSend((const char*)sendbuf + soff[r], sbytes[r], ncclInt8, r, comm->nccl, cs);
    if (nr == ncclSuccess && rbytes[r] > 0)
      nr = ncclRecv((char*)recvbuf + roff[r], rbytes[r], ncclInt8, r, comm->nccl, cs);
  }
  if (nr != ncclSuccess) {
    ncclGroupEnd();
    HVDS_NCCL_CHECK(comm, nr);
  }
  HVDS_NCCL_CHECK(comm, ncclGroupEnd());
  return HVDS_SUCCESS;
}

hvds_result_t hvds__nccl_alltoallv(hvds_nccl_comm_t* comm, const void* sendbuf,
                                   const size_t* sbytes, const size_t* soff, void* recvbuf,
                                   const size_t* rbytes, const size_t* roff,
                                   const hvds_nccl_call_t* call) {
  if (sbytes == NULL || soff == NULL || rbytes == NULL || roff == NULL)
    return HVDS_INVALID_ARGUMENT;
  HVDS_CHECK(begin(comm, call));
  return end(comm, call, enqueue_sendrecv(comm, sendbuf, sbytes, soff, recvbuf, rbytes, roff));
}

hvds_result_t hvds__nccl_alltoall_u64(hvds_nccl_comm_t* comm, const uint64_t* d_send,
                                      uint64_t* d_recv, const hvds_nccl_call_t* call) {
  if (d_send == NULL || d_recv == NULL) return HVDS_INVALID_ARGUMENT;
  HVDS_CHECK(begin(comm, call));
  return end(comm, call, enqueue_sendrecv(comm, d_send, NULL, NULL, d_recv, NULL, NULL));
}

hvds_result_t hvds__nccl_sparse_exchange(hvds_nccl_comm_t* comm, const hvds_sparse_layout_t* lay,
                                         const void* d_send, const uint64_t* scount, void* d_recv,
                                         const uint64_t* rcount, const hvds_nccl_call_t* call) {
  if (comm == NULL || lay == NULL || scount == NULL || rcount == NULL) return HVDS_INVALID_ARGUMENT;
  size_t n = (size_t)comm->size;
  size_t* v = malloc(4 * n * sizeof(size_t));
  if (v == NULL) return HVDS_SYSTEM_ERROR;
  size_t *sbytes = v, *soff = v + n, *rbytes = v + 2 * n, *roff = v + 3 * n, st = 0, rt = 0;
  for (size_t r = 0; r < n; r++) {
    sbytes[r] = hvds__sstream_bytes(lay, scount[r], 0);
    rbytes[r] = hvds__sstream_bytes(lay, rcount[r], 0);
    soff[r] = st;
    roff[r] = rt;
    st += sbytes[r];
    rt += rbytes[r];
  }
  hvds_result_t rc = hvds__nccl_alltoallv(comm, d_send, sbytes, soff, d_recv, rbytes, roff, call);
  free(v);
  return rc;
}
