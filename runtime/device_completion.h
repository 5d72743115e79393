/* Completion at launch (HOROVOD_ENABLE_ASYNC_COMPLETION): a GPU operation on the NCCL route
 * completes its handle once launched; the handle keeps an event of its GPU work, and the
 * consumer's stream waits on that event (hvds_handle_stream_wait), never the host. */
#ifndef HVDS_RUNTIME_DEVICE_COMPLETION_H_
#define HVDS_RUNTIME_DEVICE_COMPLETION_H_

#include <stddef.h>
#include <stdint.h>

#include "state.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether routed operations complete their handles at launch (the knob). */
int hvds__device_async_completion(void);
/* At launch: gives e's handle an event that completes with the GPU work launched so far on
 * comm, freeing the handle's earlier one (that work ran before). 0, or -1 with why. */
int hvds__device_handle_work(hvds_runtime_t* rt, hvds_entry_t* e, void* comm, char* why,
                             size_t why_len);
/* hvds_handle_gpu_work() and hvds_handle_stream_wait() (hvdsparse.h) on a given runtime. */
int32_t hvds__handle_gpu_work(hvds_runtime_t* rt, hvds_handle_t id);
hvds_result_t hvds__handle_stream_wait(hvds_runtime_t* rt, hvds_handle_t id, int64_t stream);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_RUNTIME_DEVICE_COMPLETION_H_ */
