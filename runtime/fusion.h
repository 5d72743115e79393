/* Fusion planner: merges negotiated allreduce responses into buckets (Horovod's FuseResponses).
 * Pure function of the response list, so every rank plans the same buckets. */
#ifndef HVDS_FUSION_H_
#define HVDS_FUSION_H_

#include <stdint.h>

#include "message.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Consumes resps[0..n) (moves their contents) and returns a new list in *out: allreduces with
 * the same dtype, reduce op, device and scale factors merged in order while the bucket stays
 * within threshold bytes (threshold <= 0 disables fusion). A response that does not match is
 * skipped over (look-ahead) while the bytes skipped stay within the threshold, then kept in
 * its place. Returns 0, or -1 when out of memory (then resps are untouched). */
int hvds__fuse_responses(hvds_response_t* resps, int32_t n, int64_t threshold,
                         hvds_response_t** out, int32_t* nout);

/* Bytes of an allreduce response: sum of sizes times the element size. */
int64_t hvds__response_bytes(const hvds_response_t* r);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_FUSION_H_ */
