/* A stand-in device library (ops/device/device_api.h) for machines without a GPU. FAKE_API_VERSION
 * and FAKE_NCCL_VERSION say what it claims, for the loader's refusals. Its "GPU memory" is host
 * memory the runtime cannot touch: each allocation is its own mapping, inaccessible except while
 * this library copies, so a runtime that read or wrote a GPU tensor directly would crash the
 * test. Tests reach the fake_device_* functions by opening this library themselves (the loader's
 * copy is the same one). It proves the runtime's control flow over GPU tensors, not CUDA's. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "fake_device_internal.h"

enum { kMaxAllocations = 4096 };

typedef struct {
  char* base;
  size_t len; /* the mapping's length */
  int device;
} allocation_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static allocation_t allocations[kMaxAllocations];
static fake_device_stats_t stats;
static int fail_device = -2;             /* copies on this GPU fail; -2: none */
static int fail_to_host, fail_to_device; /* which of its copies fail */

static int nccl_version(void) { return FAKE_NCCL_VERSION; }
static int cuda_runtime_version(void) { return 12000; }
static int device_count(char* why, size_t why_len) {
  if (why_len > 0) why[0] = '\0';
  return 0;
}

static void* host_alloc(size_t bytes, char* why, size_t why_len) {
  void* p = malloc(bytes ? bytes : 1);
  if (p == NULL) snprintf(why, why_len, "fake host_alloc: out of memory");
  pthread_mutex_lock(&mu);
  if (p != NULL) {
    stats.host_buffers++;
    stats.host_allocs++;
  }
  pthread_mutex_unlock(&mu);
  return p;
}

static void host_free(void* host) {
  pthread_mutex_lock(&mu);
  stats.host_buffers--;
  pthread_mutex_unlock(&mu);
  free(host);
}

/* The allocation holding [p, p + bytes), or NULL. Under mu. */
static allocation_t* find(const void* p, size_t bytes) {
  const char* c = p;
  for (int i = 0; i < kMaxAllocations; i++) {
    allocation_t* a = &allocations[i];
    if (a->base != NULL && c >= a->base && c + bytes <= a->base + a->len) return a;
  }
  return NULL;
}

static void direct_copy(void* dst, const void* src, const void* device_memory, size_t bytes);

/* One copy between host memory and the fake GPU memory at device_memory, as CUDA would do it
 * on device's stream; refused like CUDA refuses a pointer of another GPU. defer: checked and
 * counted now, the bytes moved by fake_event_settle (a queued copy). */
static int copy(void* dst, const void* src, const void* device_memory, size_t bytes, int device,
                int64_t stream, int to_host, int defer, char* why, size_t why_len) {
  pthread_mutex_lock(&mu);
  allocation_t* a = bytes > 0 ? find(device_memory, bytes) : NULL;
  const char* fault = NULL;
  if (device == fail_device && (to_host ? fail_to_host : fail_to_device))
    fault = "an illegal memory access was encountered (injected)";
  else if (bytes > 0 && a == NULL)
    fault = "invalid argument: not GPU memory of this process";
  else if (bytes > 0 && a->device != device)
    fault = "invalid argument: memory of another GPU";
  if (fault != NULL) {
    pthread_mutex_unlock(&mu);
    snprintf(why, why_len, "fake cudaMemcpyAsync: %s", fault);
    return -1;
  }
  if (bytes > 0 && !defer) {
    mprotect(a->base, a->len, PROT_READ | PROT_WRITE);
    memcpy(dst, src, bytes);
    mprotect(a->base, a->len, PROT_NONE);
  }
  if (to_host)
    stats.copies_to_host++;
  else
    stats.copies_to_device++;
  stats.last_stream = stream;
  pthread_mutex_unlock(&mu);
  return 0;
}

static int copy_to_host(void* host, const void* device_memory, size_t bytes, int device,
                        int64_t stream, char* why, size_t why_len) {
  return copy(host, device_memory, device_memory, bytes, device, stream, 1, 0, why, why_len);
}

/* Queued like cudaMemcpyAsync behind a sleeping stream: the bytes land only when the event is
 * waited for (or freed), so a runtime that read the host copy before waiting would read stale
 * bytes. */
static int copy_to_host_async(void* host, const void* device_memory, size_t bytes, int device,
                              int64_t stream, void** done, char* why, size_t why_len) {
  *done = NULL;
  if (bytes == 0) return 0;
  if (copy(host, device_memory, device_memory, bytes, device, stream, 1, 1, why, why_len) != 0)
    return -1;
  fake_event_t* ev = fake_route_ready_event(device, stream, why, why_len);
  ev->dst = host;
  ev->src = device_memory;
  ev->bytes = bytes;
  *done = ev;
  return 0;
}

static int event_wait(void* event, char* why, size_t why_len) {
  (void)why, (void)why_len;
  fake_event_settle(event);
  return 0;
}

void fake_event_settle(fake_event_t* ev) {
  if (ev == NULL || ev->bytes == 0) return;
  direct_copy(ev->dst, ev->src, ev->src, ev->bytes);
  ev->bytes = 0;
}

static int copy_to_device(void* device_memory, const void* host, size_t bytes, int device,
                          int64_t stream, char* why, size_t why_len) {
  return copy(device_memory, host, device_memory, bytes, device, stream, 0, 0, why, why_len);
}

/* Every fake copy completes before it returns: there is nothing to wait for but the count. */
static int synchronize(int device, char* why, size_t why_len) {
  (void)why, (void)why_len;
  pthread_mutex_lock(&mu);
  stats.synchronizes++;
  stats.last_synchronized_device = device;
  pthread_mutex_unlock(&mu);
  return 0;
}

static const hvds_device_api_t table = {
    .version = FAKE_API_VERSION,
    .nccl_version = nccl_version,
    .cuda_runtime_version = cuda_runtime_version,
    .device_count = device_count,
    .host_alloc = host_alloc,
    .host_free = host_free,
    .copy_to_host = copy_to_host,
    .copy_to_device = copy_to_device,
    .context = fake_route_context,
    .comm_create = fake_route_comm_create,
    .comm_destroy = fake_route_comm_destroy,
    .ready_event = fake_route_ready_event,
    .event_free = fake_route_event_free,
    .allreduce = fake_route_allreduce,
    .copy_to_host_async = copy_to_host_async,
    .event_wait = event_wait,
    .allgather = fake_route_allgather,
    .reducescatter = fake_route_reducescatter,
    .broadcast = fake_route_broadcast,
    .alltoall = fake_route_alltoall,
    .launch_event = fake_route_launch_event,
    .stream_wait = fake_route_stream_wait,
    .comm_pair = fake_route_comm_pair,
    .topk_feedback = fake_topk_feedback,
    .synchronize = synchronize,
    .quant_encode = fake_quant_encode,
    .quant_decode = fake_quant_decode,
};

EXPORT const hvds_device_api_t* hvds_device_api(void) { return &table; }

EXPORT void* fake_device_alloc(size_t bytes, int device) {
  size_t len = bytes ? bytes : 1;
  void* p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < kMaxAllocations; i++)
    if (allocations[i].base == NULL) {
      allocations[i] = (allocation_t){p, len, device};
      stats.device_buffers++;
      pthread_mutex_unlock(&mu);
      return p;
    }
  pthread_mutex_unlock(&mu);
  munmap(p, len);
  return NULL;
}

EXPORT void fake_device_free(void* p) {
  pthread_mutex_lock(&mu);
  allocation_t* a = p != NULL ? find(p, 0) : NULL;
  if (a != NULL) {
    munmap(a->base, a->len);
    *a = (allocation_t){NULL, 0, 0};
    stats.device_buffers--;
  }
  pthread_mutex_unlock(&mu);
}

/* The test's own view of GPU memory, not counted as copies. */
static void direct_copy(void* dst, const void* src, const void* device_memory, size_t bytes) {
  pthread_mutex_lock(&mu);
  allocation_t* a = find(device_memory, bytes);
  if (a != NULL) {
    mprotect(a->base, a->len, PROT_READ | PROT_WRITE);
    memcpy(dst, src, bytes);
    mprotect(a->base, a->len, PROT_NONE);
  }
  pthread_mutex_unlock(&mu);
}

void fake_device_read_memory(void* host, const void* device_memory, size_t bytes) {
  direct_copy(host, device_memory, device_memory, bytes);
}

void fake_device_write_memory(void* device_memory, const void* host, size_t bytes) {
  direct_copy(device_memory, host, device_memory, bytes);
}

int fake_device_of(const void* p) {
  pthread_mutex_lock(&mu);
  allocation_t* a = find(p, 0);
  int device = a != NULL ? a->device : -1;
  pthread_mutex_unlock(&mu);
  return device;
}

int fake_device_check_memory(int device, const void* p, const char* who, const char* what,
                             char* why, size_t why_len) {
  if (p == NULL || fake_device_of(p) == device) return 0;
  snprintf(why, why_len, "fake %s: %s is not memory of GPU %d", who, what, device);
  return -1;
}

EXPORT void fake_device_write(void* device_memory, const void* host, size_t bytes) {
  direct_copy(device_memory, host, device_memory, bytes);
}

EXPORT void fake_device_read(void* host, const void* device_memory, size_t bytes) {
  direct_copy(host, device_memory, device_memory, bytes);
}

EXPORT fake_device_stats_t fake_device_stats(void) {
  pthread_mutex_lock(&mu);
  fake_device_stats_t s = stats;
  pthread_mutex_unlock(&mu);
  return s;
}

void fake_device_count_topk(int64_t stream) {
  pthread_mutex_lock(&mu);
  stats.topk_calls++;
  stats.last_topk_stream = stream;
  pthread_mutex_unlock(&mu);
}

void fake_device_count_quant(int64_t stream) {
  pthread_mutex_lock(&mu);
  stats.quant_calls++;
  stats.last_quant_stream = stream;
  pthread_mutex_unlock(&mu);
}

EXPORT void fake_device_fail_copies(int device, int to_host, int to_device) {
  pthread_mutex_lock(&mu);
  fail_device = device;
  fail_to_host = to_host;
  fail_to_device = to_device;
  pthread_mutex_unlock(&mu);
}
