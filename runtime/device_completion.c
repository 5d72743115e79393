/* Completion at launch for the NCCL route (device_completion.h). */
#include "device_completion.h"

#include "device_library.h"
#include "device_route.h"
#include "handle.h"
#include "param.h"

int hvds__device_async_completion(void) {
  return hvds__param_int(HVDS_PARAM_ENABLE_ASYNC_COMPLETION) != 0;
}

int hvds__device_handle_work(hvds_runtime_t* rt, hvds_entry_t* e, void* comm, char* why,
                             size_t why_len) {
  const hvds_device_api_t* api = hvds__device_library(NULL, 0, NULL, 0);
  void* work = api->launch_event(comm, why, why_len);
  if (work == NULL) return -1;
  pthread_mutex_lock(&rt->hmu);
  void* earlier = e->handle->gpu_work;
  e->handle->gpu_work = work;
  e->handle->gpu_device = e->input.device;
  pthread_mutex_unlock(&rt->hmu);
  hvds__device_event_free(earlier);
  return 0;
}

int32_t hvds__handle_gpu_work(hvds_runtime_t* rt, hvds_handle_t id) {
  pthread_mutex_lock(&rt->hmu);
  hvds_handle_rec_t* h = hvds__handle_find_locked(rt, id);
  int32_t device = h != NULL && h->done && h->gpu_work != NULL ? h->gpu_device : -1;
  pthread_mutex_unlock(&rt->hmu);
  return device;
}

hvds_result_t hvds__handle_stream_wait(hvds_runtime_t* rt, hvds_handle_t id, int64_t stream) {
  char why[512] = "";
  pthread_mutex_lock(&rt->hmu);
  hvds_handle_rec_t* h = hvds__handle_find_locked(rt, id);
  if (h == NULL) {
    pthread_mutex_unlock(&rt->hmu);
    return hvds__set_error(HVDS_INVALID_ARGUMENT, "stream wait: unknown handle %lld",
                           (long long)id);
  }
  int rc = 0, device = h->gpu_device;
  if (h->done && h->gpu_work != NULL)  // the event stays the handle's until its release
    rc = hvds__device_library(NULL, 0, NULL, 0)
             ->stream_wait(h->gpu_work, device, stream, why, sizeof(why));
  pthread_mutex_unlock(&rt->hmu);
  if (rc != 0)
    return hvds__set_error(HVDS_SYSTEM_ERROR,
                           "rank %d: making a stream of GPU %d wait for the operation failed: %s",
                           rt->rank, device, why);
  return HVDS_SUCCESS;
}
