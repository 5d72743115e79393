/* Fusion planner: greedy in-order bucketing with look-ahead over non-matching responses. An
 * allreduce response that is already a bucket (several names; the fast path makes them) can
 * grow and can join another bucket whole. */
#include "fusion.h"

#include <stdlib.h>
#include <string.h>

#include "dtype.h"

int64_t hvds__response_bytes(const hvds_response_t* r) {
  int64_t elems = 0;
  for (int32_t i = 0; i < r->nsizes; i++) elems += r->sizes[i];
  return elems * (int64_t)hvds__dtype_bytes((hvds_dtype_t)r->dtype);
}

static int fusable(const hvds_response_t* a, const hvds_response_t* b) {
  return a->type == HVDS_MSG_ALLREDUCE && b->type == HVDS_MSG_ALLREDUCE && a->dtype == b->dtype &&
         a->reduce_op == b->reduce_op && a->device == b->device && a->prescale == b->prescale &&
         a->postscale == b->postscale;
}

/* Moves names and sizes of src onto the end of dst. */
static int append(hvds_response_t* dst, hvds_response_t* src) {
  for (int32_t i = 0; i < src->nnames; i++) {
    if (hvds__response_add_size(dst, src->sizes[i]) != 0) return -1;
    if (hvds__response_take_name(dst, src->names[i]) != 0) return -1;
    src->names[i] = NULL; /* moved */
  }
  return 0;
}

int hvds__fuse_responses(hvds_response_t* resps, int32_t n, int64_t threshold,
                         hvds_response_t** out, int32_t* nout) {
  hvds_response_t* res = calloc(n ? (size_t)n : 1, sizeof(*res));
  char* used = calloc(n ? (size_t)n : 1, 1);
  if (res == NULL || used == NULL) {
    free(res);
    free(used);
    return -1;
  }
  int32_t k = 0;
  for (int32_t i = 0; i < n; i++) {
    if (used[i]) continue;
    used[i] = 1;
    res[k] = resps[i]; /* take ownership */
    hvds_response_t* bucket = &res[k++];
    if (bucket->type != HVDS_MSG_ALLREDUCE || threshold <= 0 || bucket->nsizes != bucket->nnames)
      continue;
    int64_t bytes = hvds__response_bytes(bucket);
    int64_t skipped = 0;
    for (int32_t j = i + 1; j < n && skipped <= threshold; j++) {
      if (used[j]) continue;
      int64_t b = hvds__response_bytes(&resps[j]);
      if (fusable(bucket, &resps[j]) && resps[j].nsizes == resps[j].nnames && bytes + b <= threshold) {
        if (append(bucket, &resps[j]) != 0) {
          /* Out of memory mid-way: leave the rest unfused rather than fail. */
          break;
        }
        bytes += b;
        used[j] = 1;
        hvds__response_free(&resps[j]);
      } else {
        skipped += b;
      }
    }
  }
  free(used);
  *out = res;
  *nout = k;
  return 0;
}
