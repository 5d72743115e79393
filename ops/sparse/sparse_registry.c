/* The registry of sparse allreduce algorithms: one table of id, name, supported ops and entry
 * point, so a selector (the cost model, a user knob, a test) picks by id or by name. */
#include <string.h>

#include "sparse_internal.h"

static const hvds_sparse_algo_info_t kAlgos[] = {
    {HVDS_SPARSE_DENSE, "dense", 1, hvds__sparse_run_dense},
    {HVDS_SPARSE_ALLGATHER, "allgather", 0, hvds__sparse_run_allgather},
    {HVDS_SPARSE_SSAR_RD, "ssar_recursive_doubling", 0, hvds__sparse_run_ssar_rd},
    {HVDS_SPARSE_SSAR_SAG, "ssar_split_allgather", 0, hvds__sparse_run_ssar_sag},
    {HVDS_SPARSE_DSAR, "dsar_split_allgather", 0, hvds__sparse_run_dsar},
    {HVDS_SPARSE_ZEN, "zen", 0, hvds__sparse_run_zen},
};

#define NUM_ALGOS (sizeof kAlgos / sizeof kAlgos[0])

const hvds_sparse_algo_info_t* hvds__sparse_algo_info(hvds_sparse_algo_t a) {
  for (size_t i = 0; i < NUM_ALGOS; i++)
    if (kAlgos[i].id == a) return &kAlgos[i];
  return NULL;
}

const char* hvds__sparse_algo_name(hvds_sparse_algo_t a) {
  if (a == HVDS_SPARSE_AUTO) return "auto";
  const hvds_sparse_algo_info_t* info = hvds__sparse_algo_info(a);
  return info != NULL ? info->name : NULL;
}

hvds_sparse_algo_t hvds__sparse_algo_from_name(const char* name) {
  if (name == NULL) return HVDS_SPARSE_ALGO_COUNT;
  if (strcmp(name, "auto") == 0) return HVDS_SPARSE_AUTO;
  for (size_t i = 0; i < NUM_ALGOS; i++)
    if (strcmp(kAlgos[i].name, name) == 0) return kAlgos[i].id;
  return HVDS_SPARSE_ALGO_COUNT;
}
