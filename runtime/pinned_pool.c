/* Pinned staging buffers by size class: class c holds buffers of 4 KiB << c bytes; at most
 * kKeepPerClass of a class and kKeepBytes in all are kept. */
#include "pinned_pool.h"

#include <pthread.h>

/* A training step has every gradient in flight at once (hundreds of tensors, many of one
 * size): a class keeps up to 512 buffers, within kKeepBytes in all. */
enum { kClasses = 40, kKeepPerClass = 512, kSmallestShift = 12 };
static const size_t kKeepBytes = (size_t)1 << 30;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static void* kept[kClasses][kKeepPerClass];
static int nkept[kClasses];
static size_t kept_bytes;

static int size_class(size_t bytes) {
  int c = 0;
  while (c < kClasses - 1 && ((size_t)1 << (c + kSmallestShift)) < bytes) c++;
  return c;
}

void* hvds__pinned_get(const hvds_device_api_t* api, size_t bytes, char* why, size_t why_len) {
  int c = size_class(bytes);
  size_t cap = (size_t)1 << (c + kSmallestShift);
  if (cap < bytes) cap = bytes;  // beyond the last class: exact size, never kept
  void* p = NULL;
  pthread_mutex_lock(&mu);
  if (cap == (size_t)1 << (c + kSmallestShift) && nkept[c] > 0) {
    p = kept[c][--nkept[c]];
    kept_bytes -= cap;
  }
  pthread_mutex_unlock(&mu);
  return p != NULL ? p : api->host_alloc(cap, why, why_len);
}

void hvds__pinned_put(const hvds_device_api_t* api, void* p, size_t bytes) {
  if (p == NULL) return;
  int c = size_class(bytes);
  size_t cap = (size_t)1 << (c + kSmallestShift);
  int keep = 0;
  pthread_mutex_lock(&mu);
  if (cap >= bytes && nkept[c] < kKeepPerClass && kept_bytes + cap <= kKeepBytes) {
    kept[c][nkept[c]++] = p;
    kept_bytes += cap;
    keep = 1;
  }
  pthread_mutex_unlock(&mu);
  if (!keep) api->host_free(p);
}
