/* The flat backend: ops/'s algorithms over the set's own point-to-point communicator. It takes
 * every response, so it is the registry's last entry. */
#include "backend.h"

static int takes(const hvds_pset_t* s, const hvds_response_t* r, size_t bytes) { return 1; }

static hvds_result_t allreduce(hvds_pset_t* s, void* buf, size_t count, hvds_dtype_t dtype,
                               hvds_reduce_op_t op, const hvds_coll_opts_t* o) {
  return hvds__allreduce(s->comm, buf, count, dtype, op, o);
}

static hvds_result_t allgatherv(hvds_pset_t* s, void* buf, const size_t* bytes,
                                const hvds_coll_opts_t* o) {
  return hvds__allgatherv(s->comm, buf, bytes, o);
}

static hvds_result_t broadcast(hvds_pset_t* s, void* buf, size_t bytes, int root,
                               const hvds_coll_opts_t* o) {
  return hvds__broadcast(s->comm, buf, bytes, root, o);
}

static hvds_result_t alltoallv(hvds_pset_t* s, const void* sendbuf, const size_t* send_bytes,
                               const size_t* send_off, void* recvbuf, const size_t* recv_bytes,
                               const size_t* recv_off, const hvds_coll_opts_t* o) {
  return hvds__alltoallv(s->comm, sendbuf, send_bytes, send_off, recvbuf, recv_bytes, recv_off,
                         o);
}

static hvds_result_t reducescatter(hvds_pset_t* s, void* buf, const size_t* counts,
                                   hvds_dtype_t dtype, hvds_reduce_op_t op,
                                   const hvds_coll_opts_t* o) {
  return hvds__reducescatter(s->comm, buf, counts, dtype, op, o);
}

static hvds_result_t barrier(hvds_pset_t* s, const hvds_coll_opts_t* o) {
  return hvds__barrier(s->comm, o);
}

const hvds_backend_t hvds__backend_flat = {
    .name = "flat",
    .takes = takes,
    .allreduce = allreduce,
    .allgatherv = allgatherv,
    .broadcast = broadcast,
    .alltoallv = alltoallv,
    .reducescatter = reducescatter,
    .barrier = barrier,
};
