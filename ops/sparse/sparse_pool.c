/* Per-thread reuse of large sparse buffers (sparse_pool.h). */
#include "sparse_pool.h"

#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>

#define POOL_SLOTS 8
#define POOL_MIN_BYTES ((size_t)64 << 10)
#define POOL_MAX_BYTES ((size_t)128 << 20)

typedef struct {
  void* buf[POOL_SLOTS];
  size_t cap[POOL_SLOTS]; /* usable bytes; 0: slot empty */
  size_t kept;
} pool_t;

static pthread_key_t pool_key;
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static int pool_ok;

static void pool_drop(void* v) {
  pool_t* t = v;
  for (int i = 0; i < POOL_SLOTS; i++) free(t->buf[i]);
  free(t);
}

static void pool_make_key(void) { pool_ok = pthread_key_create(&pool_key, pool_drop) == 0; }

/* This thread's pool; created on first use when create is set. NULL without one. */
static pool_t* pool_get(int create) {
  pthread_once(&pool_once, pool_make_key);
  if (!pool_ok) return NULL;
  pool_t* t = pthread_getspecific(pool_key);
  if (t == NULL && create) {
    t = calloc(1, sizeof *t);
    if (t != NULL && pthread_setspecific(pool_key, t) != 0) {
      free(t);
      t = NULL;
    }
  }
  return t;
}

void* hvds__sparse_buf_alloc(size_t bytes) {
  if (bytes == 0) bytes = 1;
  pool_t* t = bytes >= POOL_MIN_BYTES ? pool_get(0) : NULL;
  int best = -1;
  for (int i = 0; t != NULL && i < POOL_SLOTS; i++)  // the smallest kept buffer that fits
    if (t->cap[i] >= bytes && t->cap[i] <= 2 * bytes && (best < 0 || t->cap[i] < t->cap[best]))
      best = i;
  if (best < 0) return malloc(bytes);
  void* p = t->buf[best];
  t->kept -= t->cap[best];
  t->buf[best] = NULL;
  t->cap[best] = 0;
  return p;
}

void hvds__sparse_buf_free(void* p) {
  if (p == NULL) return;
  size_t cap = malloc_usable_size(p);
  pool_t* t = cap >= POOL_MIN_BYTES && cap <= POOL_MAX_BYTES ? pool_get(1) : NULL;
  if (t != NULL) {
    for (;;) {  // make room by dropping kept buffers smaller than p, smallest first
      int empty = -1, smallest = -1;
      for (int i = 0; i < POOL_SLOTS; i++) {
        if (t->cap[i] == 0 && empty < 0) empty = i;
        if (t->cap[i] != 0 && (smallest < 0 || t->cap[i] < t->cap[smallest])) smallest = i;
      }
      if (empty >= 0 && t->kept + cap <= POOL_MAX_BYTES) {
        t->buf[empty] = p;
        t->cap[empty] = cap;
        t->kept += cap;
        return;
      }
      if (smallest < 0 || t->cap[smallest] >= cap) break;
      t->kept -= t->cap[smallest];
      free(t->buf[smallest]);
      t->buf[smallest] = NULL;
      t->cap[smallest] = 0;
    }
  }
  free(p);
}

size_t hvds__sparse_buf_kept(void) {
  pool_t* t = pool_get(0);
  return t != NULL ? t->kept : 0;
}
