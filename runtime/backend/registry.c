/* The ordered registry of collective backends (backend.h). */
#include "backend.h"

#include "process_set.h"

static const hvds_backend_t* const kBackends[] = {
    &hvds__backend_device,
    &hvds__backend_shm_segment,
    &hvds__backend_hierarchical,
    &hvds__backend_flat,
};

#define NUM_BACKENDS (sizeof kBackends / sizeof kBackends[0])

const hvds_backend_t* hvds__backend_for(const hvds_pset_t* s, const hvds_response_t* r,
                                        size_t bytes) {
  for (size_t i = 0; i < NUM_BACKENDS; i++)
    if (kBackends[i]->takes(s, r, bytes)) return kBackends[i];
  return &hvds__backend_flat;
}

hvds_result_t hvds__backend_agree(hvds_pset_t* s, uint64_t* words, size_t n,
                                  hvds_reduce_op_t op) {
  for (size_t i = 0; i < NUM_BACKENDS; i++)
    if (kBackends[i]->agrees && kBackends[i]->agrees(s)) return kBackends[i]->agree(s, words, n, op);
  hvds_coll_opts_t o = {hvds__next_tag(s), HVDS_ALGO_AUTO, 0, 0};
  return hvds__allreduce(s->comm, words, n, HVDS_INT64, op, &o);
}
