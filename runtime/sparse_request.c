/* A sparse allreduce's request as negotiation sees it: its own sparse parameters and two ranks'
 * checked against each other at the set's rank 0 (Horovod-style texts), the response it makes,
 * and the memory of a result kept on a handle. Beneath negotiation and the handles, so that they
 * need not call up into execution (execute_sparse.c) for these. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "sparse_allreduce.h"
#include "sparse_rt.h"

static const char* format_text(int32_t f) {
  return f == HVDS_SPARSE_COO    ? "a COO"
         : f == HVDS_SPARSE_ROWS ? "a ROWS"
                                 : "a dense (sparse_detect)";
}

static int64_t numel_from(const hvds_request_t* a, int32_t first) {
  int64_t n = 1;
  for (int32_t d = first; d < a->ndim; d++) n *= a->shape[d];
  return n;
}

/* A request's own sparse parameters. */
static int validate_one(const hvds_request_t* a, char* err, size_t len) {
  if (a->nextra != HVDS_SPARSE_META_COUNT || a->extra == NULL)
    return snprintf(err, len, "Malformed SPARSE_ALLREDUCE request: %d sparse parameters.",
                    a->nextra);
  int32_t f = a->extra[HVDS_SPARSE_META_FORMAT], idx = a->extra[HVDS_SPARSE_META_INDEX];
  int32_t algo = a->extra[HVDS_SPARSE_META_ALGO], q = a->extra[HVDS_SPARSE_META_QBITS];
  if ((f != HVDS_SPARSE_COO && f != HVDS_SPARSE_ROWS && f != HVDS_SPARSE_DETECT) ||
      (idx != HVDS_INT32 && idx != HVDS_INT64) || algo < 0 || algo >= HVDS_SPARSE_ALGO_COUNT ||
      (q != 0 && q != 2 && q != 4 && q != 8) || (f != HVDS_SPARSE_COO && a->ndim < 1))
    return snprintf(err, len,
                    "Invalid SPARSE_ALLREDUCE parameters: format %d, index type %d, algorithm %d, "
                    "quantization %d bits, dense rank %d.",
                    f, idx, algo, q, a->ndim);
  return 0;
}

int hvds__sparse_validate(const hvds_request_t* a, const hvds_request_t* b, char* err, size_t len) {
  if (b == NULL) return validate_one(a, err, len);
  int n = validate_one(b, err, len);
  if (n > 0 || validate_one(a, err, len) > 0) return n;  // a's own problem is reported later
  const int32_t *x = a->extra, *y = b->extra;
  if (x[HVDS_SPARSE_META_FORMAT] != y[HVDS_SPARSE_META_FORMAT])
    return snprintf(err, len,
                    "Mismatched sparse formats: One rank sent %s tensor, but another rank sent "
                    "%s tensor.",
                    format_text(x[HVDS_SPARSE_META_FORMAT]),
                    format_text(y[HVDS_SPARSE_META_FORMAT]));
  if (x[HVDS_SPARSE_META_INDEX] != y[HVDS_SPARSE_META_INDEX])
    return snprintf(err, len,
                    "Mismatched sparse index types: One rank sent indices of type %s, but another "
                    "rank sent indices of type %s.",
                    hvds__dtype_name((hvds_dtype_t)x[HVDS_SPARSE_META_INDEX]),
                    hvds__dtype_name((hvds_dtype_t)y[HVDS_SPARSE_META_INDEX]));
  if (x[HVDS_SPARSE_META_ALGO] != y[HVDS_SPARSE_META_ALGO])
    return snprintf(err, len,
                    "Mismatched sparse allreduce algorithms: One rank asked for %s, but another "
                    "rank asked for %s.",
                    hvds__sparse_algo_name((hvds_sparse_algo_t)x[HVDS_SPARSE_META_ALGO]),
                    hvds__sparse_algo_name((hvds_sparse_algo_t)y[HVDS_SPARSE_META_ALGO]));
  if (x[HVDS_SPARSE_META_QBITS] != y[HVDS_SPARSE_META_QBITS])
    return snprintf(err, len,
                    "Mismatched sparse quantization: One rank asked for %d bits, but another rank "
                    "asked for %d bits.",
                    (int)x[HVDS_SPARSE_META_QBITS], (int)y[HVDS_SPARSE_META_QBITS]);
  return 0;
}

int hvds__sparse_response_fill(hvds_response_t* out, const hvds_request_t* a) {
  int32_t f = a->extra[HVDS_SPARSE_META_FORMAT];
  int rows = f == HVDS_SPARSE_ROWS || (f == HVDS_SPARSE_DETECT && a->ndim >= 2);
  int64_t dim = rows ? a->shape[0] : numel_from(a, 0), row = rows ? numel_from(a, 1) : 1;
  if (hvds__response_add_size(out, dim) != 0 || hvds__response_add_size(out, row) != 0) return -1;
  out->extra = malloc(HVDS_SPARSE_META_COUNT * sizeof(int32_t));
  if (out->extra == NULL) return -1;
  memcpy(out->extra, a->extra, HVDS_SPARSE_META_COUNT * sizeof(int32_t));
  out->nextra = HVDS_SPARSE_META_COUNT;
  return 0;
}

/* The memory of a result kept sparse on a handle. */
void hvds__sparse_out_free(hvds_sparse_out_t* o) {
  if (o == NULL) return;
  free(o->owned);
  free(o);
}
