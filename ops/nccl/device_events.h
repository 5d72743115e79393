/* The device library's events: the producers' ready events and the completions of staging
 * copies and the launches' ends, pooled (device_api.h's ready_event, event_free, event_wait,
 * copy_to_host_async, stream_wait). */
#ifndef HVDS_OPS_NCCL_DEVICE_EVENTS_H_
#define HVDS_OPS_NCCL_DEVICE_EVENTS_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

void* hvds__route_ready_event(int device, int64_t stream, char* why, size_t why_len);
void hvds__route_event_free(void* event);
int hvds__route_event_wait(void* event, char* why, size_t why_len);
int hvds__route_copy_to_host_async(void* host, const void* device_memory, size_t bytes, int device,
                                   int64_t stream, void** done, char* why, size_t why_len);
int hvds__route_stream_wait(void* event, int device, int64_t stream, char* why, size_t why_len);
/* The cudaEvent_t behind an event of this library. */
void* hvds__device_event_handle(void* event);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_OPS_NCCL_DEVICE_EVENTS_H_ */
