/* The device library's events (device_events.h): pooled, since creating one costs
 * microseconds on every operation. A freed event may be recorded again at once: a stream that
 * waits on it took its state when it started waiting. */
#include "device_events.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "current_device.h"

typedef struct ready_event {
  cudaEvent_t ev;
  int device;
  struct ready_event* next;
} ready_event_t;

static pthread_mutex_t events_mu = PTHREAD_MUTEX_INITIALIZER;
static ready_event_t* free_events;

static int failed(cudaError_t e, const char* what, char* why, size_t why_len) {
  if (why != NULL && why_len > 0) snprintf(why, why_len, "%s: %s", what, cudaGetErrorString(e));
  (void)cudaGetLastError();
  return -1;
}

void* hvds__route_ready_event(int device, int64_t stream, char* why, size_t why_len) {
  pthread_mutex_lock(&events_mu);
  ready_event_t** at = &free_events;
  while (*at != NULL && (*at)->device != device) at = &(*at)->next;
  ready_event_t* r = *at;
  if (r != NULL) *at = r->next;
  pthread_mutex_unlock(&events_mu);
  int previous = hvds__current_device();
  cudaError_t e = cudaSetDevice(device);
  if (r == NULL && e == cudaSuccess) {
    r = calloc(1, sizeof(*r));
    if (r == NULL) {
      hvds__restore_device(previous);
      if (why != NULL && why_len > 0) snprintf(why, why_len, "out of memory");
      return NULL;
    }
    r->device = device;
    e = cudaEventCreateWithFlags(&r->ev, cudaEventDisableTiming);
  }
  if (e == cudaSuccess) e = cudaEventRecord(r->ev, (cudaStream_t)(intptr_t)stream);
  hvds__restore_device(previous);
  if (e != cudaSuccess) {
    failed(e, "recording an event", why, why_len);
    if (r != NULL && r->ev != NULL) cudaEventDestroy(r->ev);
    free(r);
    return NULL;
  }
  return r;
}

void hvds__route_event_free(void* event) {
  ready_event_t* r = event;
  if (r == NULL) return;
  pthread_mutex_lock(&events_mu);
  r->next = free_events;
  free_events = r;
  pthread_mutex_unlock(&events_mu);
}

int hvds__route_event_wait(void* event, char* why, size_t why_len) {
  ready_event_t* r = event;
  if (r == NULL) return 0;
  cudaError_t e = cudaEventSynchronize(r->ev);
  return e == cudaSuccess ? 0 : failed(e, "cudaEventSynchronize", why, why_len);
}

void* hvds__device_event_handle(void* event) { return ((ready_event_t*)event)->ev; }

int hvds__route_copy_to_host_async(void* host, const void* device_memory, size_t bytes, int device,
                                   int64_t stream, void** done, char* why, size_t why_len) {
  *done = NULL;
  if (bytes == 0) return 0;
  int previous = hvds__current_device();
  cudaError_t e = cudaSetDevice(device);
  if (e == cudaSuccess)
    e = cudaMemcpyAsync(host, device_memory, bytes, cudaMemcpyDeviceToHost,
                        (cudaStream_t)(intptr_t)stream);
  hvds__restore_device(previous);
  if (e != cudaSuccess) return failed(e, "cudaMemcpyAsync", why, why_len);
  *done = hvds__route_ready_event(device, stream, why, why_len);
  return *done != NULL ? 0 : -1;
}

int hvds__route_stream_wait(void* event, int device, int64_t stream, char* why, size_t why_len) {
  ready_event_t* r = event;
  int previous = hvds__current_device();
  cudaError_t e = cudaSetDevice(device);
  if (e == cudaSuccess) e = cudaStreamWaitEvent((cudaStream_t)(intptr_t)stream, r->ev, 0);
  hvds__restore_device(previous);
  return e == cudaSuccess ? 0 : failed(e, "cudaStreamWaitEvent", why, why_len);
}
