/* Page-locked host buffers from the device library, kept for reuse: asking CUDA for pinned
 * memory costs far more than the copy it serves, so the staged operations of one training step
 * reuse the buffers of the step before, by power-of-two size class. Process-wide and
 * thread-safe. */
#ifndef HVDS_RUNTIME_PINNED_POOL_H_
#define HVDS_RUNTIME_PINNED_POOL_H_

#include <stddef.h>

#include "device_api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A buffer of at least bytes from api's host_alloc, or NULL with the reason in why. */
void* hvds__pinned_get(const hvds_device_api_t* api, size_t bytes, char* why, size_t why_len);
/* Gives back a buffer of hvds__pinned_get(bytes): kept for reuse, or freed when its class is
 * full. NULL is ignored. */
void hvds__pinned_put(const hvds_device_api_t* api, void* p, size_t bytes);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_RUNTIME_PINNED_POOL_H_ */
