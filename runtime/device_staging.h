/* GPU tensors staged through page-locked host memory into the CPU path
 * (HVDSPARSE_GPU_OPERATIONS=host, docs/gpu.md): the input's copy to host is queued on the
 * producer's stream at enqueue (the caller does not wait), the collective waits for it and runs
 * on the host copy, and the result is copied back to the GPU before the handle completes.
 * Negotiation still sees the tensor's device. */
#ifndef HVDS_RUNTIME_DEVICE_STAGING_H_
#define HVDS_RUNTIME_DEVICE_STAGING_H_

#include <stddef.h>
#include <stdint.h>

#include "state.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What every GPU entry must be, staged or routed: a known HVDSPARSE_GPU_OPERATIONS, a device
 * library, its output on its input's GPU, an allocator where the runtime sizes the output. On
 * failure the error is recorded (hvds_last_error); what (e.g. "Allreduce") names it. */
hvds_result_t hvds__check_gpu_entry(const hvds_entry_t* e, const char* what);

/* Stages e, whose input is on a GPU (hvds__check_gpu_entry passed): copies the input to host memory
 * after the work queued on stream, and points e's input and output at host memory. rank and what
 * (e.g. "Allreduce") name the failure; the error is recorded (hvds_last_error) and e left for the
 * caller to free. */
hvds_result_t hvds__stage_entry(hvds_entry_t* e, int64_t stream, int rank, const char* what);

/* Waits until e's copy in (queued at enqueue on the producer's stream) has landed in host
 * memory: the collective reads it next. A failed copy is this rank's GPU failing: the message
 * names the rank and the tensor, and the caller stops the runtime. */
hvds_result_t hvds__staging_wait(hvds_entry_t* e, int rank, char* message, size_t message_len);

/* Moves a staged entry's result to its GPU (allreduce and broadcast: into the caller's tensor;
 * allgather, alltoall, reducescatter: into memory from the caller's allocator, which then
 * becomes the handle's output). Returns status, or the copy's failure with its reason in
 * message (message_len bytes). Nothing is copied when status is a failure. */
hvds_result_t hvds__unstage_entry(hvds_entry_t* e, hvds_result_t status, int rank, char* message,
                                  size_t message_len);

/* Returns a staged entry's host memory to the pool. */
void hvds__staging_free(struct hvds_staging* st);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_RUNTIME_DEVICE_STAGING_H_ */
