/* What every execution path shares, and the queues beneath it that end entries (lane,
 * process sets, the coordinator's failure path): an entry's end and output, the fusion buffer,
 * scaling after a reduction, the ring's segment, the timeline's marks. The cycle's owner only. */
#ifndef HVDS_EXEC_SHARED_H_
#define HVDS_EXEC_SHARED_H_

#include "state.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The entries a response names on this rank, in its order. */
typedef struct {
  hvds_entry_t** entries; /* one per response name; NULL where this rank has none (joined) */
  int32_t n;
} hvds_exec_t;
/* Completes and frees an entry. */
void hvds__entry_finish(hvds_runtime_t* rt, hvds_entry_t* e, hvds_result_t status,
                        const char* message);
/* Frees an entry that was never queued or is already finished (accepts NULL). */
void hvds__entry_free(hvds_entry_t* e);
/* Allocates output i of e's handle with the given shape; NULL on failure (entry completed). */
void* hvds__entry_alloc_output(hvds_entry_t* e, int32_t ndim, const int64_t* shape, size_t bytes);
/* Frees the fusion buffer (at shutdown). */
void hvds__fusion_buffer_free(hvds_runtime_t* rt);
/* Ensures the fusion buffer holds at least bytes. */
void* hvds__fusion_buffer(hvds_runtime_t* rt, size_t bytes);
/* Scale factor to apply after reducing (Average divides by the set size). */
double hvds__post_factor(const hvds_pset_t* s, const hvds_response_t* r);
/* Applies r's post-reduction scaling to count elements of dtype at buf: Average without a
 * postscale factor divides by the set size (an average of equal values is then exact, as the
 * frameworks' own x * n / n), anything else multiplies by hvds__post_factor. */
void hvds__post_scale(const hvds_pset_t* s, const hvds_response_t* r, void* buf, size_t count,
                      hvds_dtype_t dtype);
/* Ring segment for an allreduce of bytes over nranks: the knob, else about a quarter block. */
size_t hvds__ring_chunk(hvds_runtime_t* rt, size_t bytes, int nranks);
/* The largest allreduce run by halving-doubling: RHD_MAX_BYTES, else the ops' rule for the link
 * measured at init (rank 0's measurement, so every rank picks the same algorithm). */
size_t hvds__rhd_max(const hvds_runtime_t* rt);
/* Timeline helpers: no-ops unless this rank writes a timeline. */
void hvds__tl_start(hvds_runtime_t* rt, const hvds_response_t* r, const char* args);
void hvds__tl_activity(hvds_runtime_t* rt, const hvds_response_t* r,
                       const char* activity); /* NULL ends */
void hvds__tl_end(hvds_runtime_t* rt, const hvds_response_t* r, hvds_exec_t* x);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_EXEC_SHARED_H_ */
