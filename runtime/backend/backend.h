/* Collective backends: the ways the runtime runs a negotiated response, and their ordered
 * registry. The runtime asks the registry which backend takes a response; the first entry that
 * does runs it. Today: the host's shared segment (every rank on one host), the hierarchical
 * allreduce (local phases over shared memory, cross-host over TCP), and the flat algorithms
 * over the set's point-to-point communicator, which takes everything; ahead of them the device
 * backend: GPU allreduces, allgathers, broadcasts, alltoalls and reducescatters by NCCL when
 * HVDSPARSE_GPU_OPERATIONS=nccl.
 *
 * Every decision depends only on negotiated data (the response, the set, what init measured
 * and agreed), so every rank of a set picks the same backend for every response. Backends run
 * in the cycle owner's thread; on failure they leave the message in s->comm->error. */
#ifndef HVDS_BACKEND_H_
#define HVDS_BACKEND_H_

#include <stddef.h>
#include <stdint.h>

#include "collectives.h"
#include "exec_layout.h"
#include "exec_shared.h"
#include "state.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hvds_backend {
  const char* name;
  /* Whether this backend runs response r on set s; bytes is the payload a fused allreduce
   * moves (0 for other kinds). Decided on negotiated data only. */
  int (*takes)(const hvds_pset_t* s, const hvds_response_t* r, size_t bytes);
  /* The collectives of ops/collectives.h over the set's ranks. A backend whose takes() accepts
   * a kind fills its entry point. op is never Average (the caller scales). */
  hvds_result_t (*allreduce)(hvds_pset_t* s, void* buf, size_t count, hvds_dtype_t dtype,
                             hvds_reduce_op_t op, const hvds_coll_opts_t* o);
  hvds_result_t (*allgatherv)(hvds_pset_t* s, void* buf, const size_t* bytes,
                              const hvds_coll_opts_t* o);
  hvds_result_t (*broadcast)(hvds_pset_t* s, void* buf, size_t bytes, int root,
                             const hvds_coll_opts_t* o);
  hvds_set_alltoallv_fn alltoallv; /* exec_layout.h */
  hvds_result_t (*reducescatter)(hvds_pset_t* s, void* buf, const size_t* counts,
                                 hvds_dtype_t dtype, hvds_reduce_op_t op,
                                 const hvds_coll_opts_t* o);
  hvds_result_t (*barrier)(hvds_pset_t* s, const hvds_coll_opts_t* o);
  /* Optional (NULL: none): a fused allreduce straight from each tensor's input to its output,
   * with no fusion buffer between. */
  hvds_result_t (*allreduce_pieces)(hvds_pset_t* s, const hvds_coll_piece_t* pieces, int n,
                                    hvds_dtype_t dtype, hvds_reduce_op_t op);
  /* Optional (NULL: none): the negotiation's allreduce of a few flag words, when the backend
   * has a faster one than messages for set s (controls: one per cycle). */
  int (*agrees)(const hvds_pset_t* s);
  hvds_result_t (*agree)(hvds_pset_t* s, uint64_t* words, size_t n, hvds_reduce_op_t op);
  /* Optional (NULL: none): runs a whole response of a kind it takes (allreduce, allgather,
   * broadcast, alltoall, reducescatter) itself, on the memory x's entries name, and completes them
   * now or later from a thread of its own (the device backend: when the GPU is done). Takes x's
   * entries (leaves them NULL). */
  hvds_result_t (*run)(hvds_pset_t* s, hvds_response_t* r, hvds_exec_t* x);
} hvds_backend_t;

/* The backends in registry order (registry.c). */
extern const hvds_backend_t hvds__backend_device;      /* device.c */
extern const hvds_backend_t hvds__backend_shm_segment; /* shm_segment.c */
extern const hvds_backend_t hvds__backend_hierarchical; /* hierarchical.c */
extern const hvds_backend_t hvds__backend_flat;         /* flat.c */

/* The first backend of the registry that takes r on s (the flat one takes everything). */
const hvds_backend_t* hvds__backend_for(const hvds_pset_t* s, const hvds_response_t* r,
                                        size_t bytes);
/* The negotiation's agreement on set s: a backend's fast one when it has one for s, else a
 * bitwise allreduce over the set's communicator with the set's next tag. */
hvds_result_t hvds__backend_agree(hvds_pset_t* s, uint64_t* words, size_t n, hvds_reduce_op_t op);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_BACKEND_H_ */
