/* The device library's one export (ops/device/device_api.h): the table through which the
 * runtime and the launcher reach CUDA and NCCL without linking either. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>

#include "current_device.h"
#include "device_api.h"
#include "device_events.h"
#include "device_quant.h"
#include "device_topk.h"
#include "nccl_backend.h"
#include "nccl_route.h"

static int cuda_runtime_version(void) {
  int v = 0;
  return cudaRuntimeGetVersion(&v) == cudaSuccess ? v : 0;
}

static int device_count(char* why, size_t why_len) {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) n = 0;
  if (why != NULL && why_len > 0)
    snprintf(why, why_len, "%s",
             err != cudaSuccess ? cudaGetErrorString(err)
             : n == 0           ? "the CUDA runtime sees no GPU"
                                : "");
  return n;
}

/* The reason of a failed CUDA call, cleared from the thread's sticky state where CUDA allows. */
static int failed(cudaError_t err, const char* what, char* why, size_t why_len) {
  if (why != NULL && why_len > 0) snprintf(why, why_len, "%s: %s", what, cudaGetErrorString(err));
  (void)cudaGetLastError();
  return -1;
}

static void* host_alloc(size_t bytes, char* why, size_t why_len) {
  void* p = NULL;
  cudaError_t err = cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable);
  if (err != cudaSuccess) {
    failed(err, "cudaHostAlloc", why, why_len);
    return NULL;
  }
  return p;
}

static void host_free(void* host) {
  if (host != NULL) cudaFreeHost(host);
}

/* One synchronous copy ordered on the caller's stream, on the caller's GPU. */
static int copy_on_stream(void* dst, const void* src, size_t bytes, enum cudaMemcpyKind kind,
                          int device, int64_t stream, char* why, size_t why_len) {
  if (bytes == 0) return 0;
  int previous = hvds__current_device();
  cudaStream_t s = (cudaStream_t)(intptr_t)stream;
  cudaError_t err = cudaSetDevice(device);
  const char* what = "cudaSetDevice";
  if (err == cudaSuccess) err = cudaMemcpyAsync(dst, src, bytes, kind, s), what = "cudaMemcpyAsync";
  if (err == cudaSuccess) err = cudaStreamSynchronize(s), what = "cudaStreamSynchronize";
  hvds__restore_device(previous);
  return err == cudaSuccess ? 0 : failed(err, what, why, why_len);
}

static int copy_to_host(void* host, const void* device_memory, size_t bytes, int device,
                        int64_t stream, char* why, size_t why_len) {
  return copy_on_stream(host, device_memory, bytes, cudaMemcpyDeviceToHost, device, stream, why,
                        why_len);
}

static int copy_to_device(void* device_memory, const void* host, size_t bytes, int device,
                          int64_t stream, char* why, size_t why_len) {
  return copy_on_stream(device_memory, host, bytes, cudaMemcpyHostToDevice, device, stream, why,
                        why_len);
}

static int synchronize(int device, char* why, size_t why_len) {
  int previous = hvds__current_device();
  cudaError_t err = cudaSetDevice(device);
  const char* what = "cudaSetDevice";
  if (err == cudaSuccess) err = cudaDeviceSynchronize(), what = "cudaDeviceSynchronize";
  hvds__restore_device(previous);
  return err == cudaSuccess ? 0 : failed(err, what, why, why_len);
}

static const hvds_device_api_t table = {
    .version = HVDS_DEVICE_API_VERSION,
    .nccl_version = hvds__nccl_version,
    .cuda_runtime_version = cuda_runtime_version,
    .device_count = device_count,
    .host_alloc = host_alloc,
    .host_free = host_free,
    .copy_to_host = copy_to_host,
    .copy_to_device = copy_to_device,
    .context = hvds__route_context,
    .comm_create = hvds__route_comm_create,
    .comm_destroy = hvds__route_comm_destroy,
    .ready_event = hvds__route_ready_event,
    .event_free = hvds__route_event_free,
    .allreduce = hvds__route_allreduce,
    .copy_to_host_async = hvds__route_copy_to_host_async,
    .event_wait = hvds__route_event_wait,
    .allgather = hvds__route_allgather,
    .reducescatter = hvds__route_reducescatter,
    .broadcast = hvds__route_broadcast,
    .alltoall = hvds__route_alltoall,
    .launch_event = hvds__route_launch_event,
    .stream_wait = hvds__route_stream_wait,
    .comm_pair = hvds__route_comm_pair,
    .topk_feedback = hvds__device_topk_feedback,
    .synchronize = synchronize,
    .quant_encode = hvds__device_quant_encode,
    .quant_decode = hvds__device_quant_decode,
};

__attribute__((visibility("default"))) const hvds_device_api_t* hvds_device_api(void) {
  return &table;
}
