/* Public API of the sparse allreduce: the enqueue (validated on the caller's thread), the
 * sparse_detect hook of the dense allreduce, and reading a handle's sparse result. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cost_model.h"
#include "device_support.h"
#include "dtype.h"
#include "enqueue.h"
#include "handle.h"
#include "sparse_allreduce.h"
#include "sparse_rt.h"
#include "state.h"

hvds_result_t hvds__sparse_opts_algo(hvds_runtime_t* rt, const hvds_op_options_t* o,
                                     const char* tensor, int32_t* algo) {
  const char* name = OPT_HAS(o, sparse_algorithm) ? o->sparse_algorithm : NULL;
  if (name == NULL) {
    *algo = rt->sparse_algo;
    return HVDS_SUCCESS;
  }
  hvds_sparse_algo_t a = hvds__sparse_algo_from_name(name);
  if (a == HVDS_SPARSE_ALGO_COUNT)
    return hvds__set_error(HVDS_INVALID_ARGUMENT,
                           "sparse allreduce '%s': unknown algorithm '%s' (auto, dense, allgather, "
                           "ssar_recursive_doubling, ssar_split_allgather, dsar_split_allgather, "
                           "zen)",
                           tensor, name);
  *algo = (int32_t)a;
  return HVDS_SUCCESS;
}

/* The caller's sparse_quant_bits (0 when its options predate the field), checked. */
static hvds_result_t opts_qbits(const hvds_op_options_t* o, const char* tensor, int32_t* bits) {
  *bits = OPT_HAS(o, sparse_quant_bits) ? o->sparse_quant_bits : 0;
  if (*bits == 0 || *bits == 2 || *bits == 4 || *bits == 8) return HVDS_SUCCESS;
  return hvds__set_error(HVDS_INVALID_ARGUMENT,
                         "sparse allreduce '%s': sparse_quant_bits must be 0, 2, 4 or 8, not %d",
                         tensor, (int)*bits);
}

static int64_t numel(int32_t ndim, const int64_t* shape) {
  int64_t n = 1;
  for (int32_t d = 0; d < ndim; d++) n *= shape[d];
  return n;
}

hvds_result_t hvds__sparse_detect_entry(hvds_runtime_t* rt, hvds_entry_t* e,
                                        const hvds_op_options_t* o) {
  int detect =
      OPT_HAS(o, sparse_detect) && o->sparse_detect >= 0 ? o->sparse_detect > 0 : rt->sparse_detect;
  const hvds_tensor_t* t = &e->input;
  if (!detect || (e->op != HVDS_SUM && e->op != HVDS_AVERAGE) || t->device != -1 || t->ndim < 1)
    return HVDS_SUCCESS;
  int64_t n = numel(t->ndim, t->shape);
  if ((size_t)n * hvds__dtype_bytes(t->dtype) < HVDS_SPARSE_DETECT_MIN_BYTES) return HVDS_SUCCESS;
  // Rows for matrices and up, elements for vectors: the layout execution will use.
  hvds_sparse_layout_t lay = {(size_t)(t->ndim >= 2 ? t->shape[0] : n),
                              (size_t)(t->ndim >= 2 && t->shape[0] > 0 ? n / t->shape[0] : 1),
                              t->dtype, HVDS_INT64};
  if (lay.dim < ((size_t)1 << 31)) lay.index_dtype = HVDS_INT32;
  char err[256];
  if (lay.row == 0 || hvds__sparse_layout_check(&lay, err, sizeof err) != HVDS_SUCCESS)
    return HVDS_SUCCESS;  // no sum kernel for the dtype: the plain allreduce handles it
  int32_t algo, qbits;
  hvds_result_t rc = hvds__sparse_opts_algo(rt, o, e->name, &algo);
  if (rc == HVDS_SUCCESS) rc = opts_qbits(o, e->name, &qbits);
  if (rc != HVDS_SUCCESS) return rc;
  e->type = HVDS_MSG_SPARSE_ALLREDUCE;
  e->sparse_meta[HVDS_SPARSE_META_FORMAT] = HVDS_SPARSE_DETECT;
  e->sparse_meta[HVDS_SPARSE_META_INDEX] = lay.index_dtype;
  e->sparse_meta[HVDS_SPARSE_META_ALGO] = algo;
  e->sparse_meta[HVDS_SPARSE_META_QBITS] = qbits;
  e->sparse_dense_out = 1;
  return HVDS_SUCCESS;
}

/* Checks of the caller's sparse tensor that need no other rank. */
static hvds_result_t check_input(const hvds_sparse_tensor_t* in, const char* name) {
  if (in->format != HVDS_SPARSE_COO && in->format != HVDS_SPARSE_ROWS)
    return hvds__set_error(HVDS_INVALID_ARGUMENT, "sparse allreduce '%s': unknown format %d", name,
                           (int)in->format);
  if (in->index_dtype != HVDS_INT32 && in->index_dtype != HVDS_INT64)
    return hvds__set_error(HVDS_INVALID_ARGUMENT,
                           "sparse allreduce '%s': indices must be INT32 or INT64, not %s", name,
                           hvds__dtype_name(in->index_dtype));
  if ((int)in->dtype < 0 || in->dtype >= HVDS_DTYPE_COUNT)
    return hvds__set_error(HVDS_INVALID_ARGUMENT, "sparse allreduce '%s': unsupported dtype %d",
                           name, (int)in->dtype);
  int32_t min_ndim = in->format == HVDS_SPARSE_ROWS ? 1 : 0;
  if (in->dense_ndim < min_ndim || in->dense_ndim > HVDS_MAX_DIMS)
    return hvds__set_error(HVDS_INVALID_ARGUMENT,
                           "sparse allreduce '%s': dense shape of rank %d outside %d..%d", name,
                           in->dense_ndim, min_ndim, HVDS_MAX_DIMS);
  for (int32_t d = 0; d < in->dense_ndim; d++)
    if (in->dense_shape[d] < 0)
      return hvds__set_error(HVDS_INVALID_ARGUMENT,
                             "sparse allreduce '%s': negative dimension %lld", name,
                             (long long)in->dense_shape[d]);
  if (in->nnz < 0)
    return hvds__set_error(HVDS_INVALID_ARGUMENT, "sparse allreduce '%s': nnz %lld is negative",
                           name, (long long)in->nnz);
  if (in->nnz > 0 && (in->indices == NULL || in->values == NULL))
    return hvds__set_error(HVDS_INVALID_ARGUMENT,
                           "sparse allreduce '%s': indices and values are required when nnz > 0",
                           name);
  if (in->device != -1) return hvds__refuse_device_tensor("sparse allreduce", name, in->device);
  return HVDS_SUCCESS;
}

static hvds_result_t check_dense_out(const hvds_sparse_tensor_t* in, const hvds_tensor_t* out,
                                     const char* name) {
  if (out->ndim < 0 || out->ndim > HVDS_MAX_DIMS)
    return hvds__set_error(HVDS_INVALID_ARGUMENT, "sparse allreduce '%s': dense_out of rank %d",
                           name, out->ndim);
  int64_t want = numel(in->dense_ndim, in->dense_shape);
  if (out->dtype != in->dtype || numel(out->ndim, out->shape) != want)
    return hvds__set_error(HVDS_INVALID_ARGUMENT,
                           "sparse allreduce '%s': dense_out must have the dense shape's size "
                           "and the values' dtype",
                           name);
  if (want > 0 && out->data == NULL)
    return hvds__set_error(HVDS_INVALID_ARGUMENT, "sparse allreduce '%s': dense_out data is NULL",
                           name);
  if (out->device != -1)
    return hvds__set_error(HVDS_NOT_SUPPORTED,
                           "sparse allreduce '%s': dense_out is on device %d; only CPU memory "
                           "is supported",
                           name, out->device);
  return HVDS_SUCCESS;
}

hvds_result_t hvds_sparse_allreduce_async(const hvds_sparse_tensor_t* input,
                                          hvds_tensor_t* dense_out, const hvds_op_options_t* opts,
                                          hvds_handle_t* handle) {
  hvds_runtime_t* rt = &hvds__rt;
  if (opts == NULL || opts->name == NULL || handle == NULL || input == NULL)
    return hvds__set_error(HVDS_INVALID_ARGUMENT,
                           "Sparse allreduce: options, name, input and handle are required");
  hvds_result_t rc = hvds__enqueue_ready(rt, opts->process_set, "Sparse allreduce");
  if (rc != HVDS_SUCCESS) return rc;
  const char* name = opts->name;
  if (opts->op != HVDS_SUM && opts->op != HVDS_AVERAGE)
    return hvds__set_error(HVDS_NOT_SUPPORTED,
                           "sparse allreduce '%s': reduce op %d; only Sum and Average are "
                           "supported",
                           name, (int)opts->op);
  rc = check_input(input, name);
  if (rc == HVDS_SUCCESS && dense_out != NULL) rc = check_dense_out(input, dense_out, name);
  int32_t algo = 0, qbits = 0;
  if (rc == HVDS_SUCCESS) rc = hvds__sparse_opts_algo(rt, opts, name, &algo);
  if (rc == HVDS_SUCCESS) rc = opts_qbits(opts, name, &qbits);
  if (rc != HVDS_SUCCESS) return rc;
  hvds_entry_t* e = hvds__enqueue_entry_new(name, HVDS_MSG_SPARSE_ALLREDUCE, opts);
  if (e == NULL) return hvds__set_error(HVDS_SYSTEM_ERROR, "out of memory");
  // The request carries the values' dtype and device and the dense shape.
  e->input.data = (void*)input->values;
  e->input.dtype = input->dtype;
  e->input.device = input->device;
  e->input.ndim = input->dense_ndim;
  memcpy(e->input.shape, input->dense_shape, sizeof e->input.shape);
  if (dense_out != NULL) e->output = *dense_out;
  e->sparse = *input;
  e->sparse_meta[HVDS_SPARSE_META_FORMAT] = input->format;
  e->sparse_meta[HVDS_SPARSE_META_INDEX] = input->index_dtype;
  e->sparse_meta[HVDS_SPARSE_META_ALGO] = algo;
  e->sparse_meta[HVDS_SPARSE_META_QBITS] = qbits;
  e->sparse_dense_out = dense_out != NULL;
  return hvds__enqueue_submit(rt, e, handle);
}

/* The handle's sparse record under rt->hmu, or the reason there is none. */
static hvds_result_t find_sparse_locked(hvds_runtime_t* rt, hvds_handle_t id,
                                        hvds_sparse_out_t** out) {
  hvds_handle_rec_t* h = hvds__handle_find_locked(rt, id);
  if (h == NULL) return HVDS_INVALID_ARGUMENT;
  if (!h->done) return HVDS_IN_PROGRESS;
  if (h->status != HVDS_SUCCESS) return h->status;
  if (h->sparse == NULL) return HVDS_INVALID_ARGUMENT;
  *out = h->sparse;
  return HVDS_SUCCESS;
}

hvds_result_t hvds_handle_sparse_result(hvds_handle_t handle, int64_t* nnz, const void** indices,
                                        const void** values, int32_t* is_dense,
                                        const char** algorithm) {
  hvds_runtime_t* rt = &hvds__rt;
  pthread_mutex_lock(&rt->hmu);
  hvds_sparse_out_t* o = NULL;
  hvds_result_t rc = find_sparse_locked(rt, handle, &o);
  if (rc == HVDS_SUCCESS && !o->has_result) rc = HVDS_INVALID_ARGUMENT;
  if (rc == HVDS_SUCCESS) {
    if (nnz) *nnz = o->nnz;
    if (indices) *indices = o->indices;
    if (values) *values = o->values;
    if (is_dense) *is_dense = o->is_dense;
    if (algorithm) *algorithm = o->stats.algorithm_name;
  }
  pthread_mutex_unlock(&rt->hmu);
  if (rc == HVDS_INVALID_ARGUMENT)
    hvds__set_error(rc, "handle %lld has no sparse allreduce result", (long long)handle);
  return rc;
}

hvds_result_t hvds__handle_sparse_stats(hvds_handle_t handle, hvds_sparse_stats_t* out) {
  hvds_runtime_t* rt = &hvds__rt;
  pthread_mutex_lock(&rt->hmu);
  hvds_sparse_out_t* o = NULL;
  hvds_result_t rc = find_sparse_locked(rt, handle, &o);
  if (rc == HVDS_SUCCESS) *out = o->stats;
  pthread_mutex_unlock(&rt->hmu);
  return rc;
}

uint64_t hvds_zen_key(void) { return atomic_load(&hvds__rt.initialized) ? hvds__rt.zen_seed : 0; }
