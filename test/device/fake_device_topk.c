/* The fake device library's topk_feedback (device_api.h): the selection's rules done plainly
 * on host copies of the fake GPU memory (sort by magnitude key, ties to the lower index), so a
 * test can hold it against the runtime's CPU selection. Control flow only: the kernel itself
 * is checked on a GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_device_internal.h"

typedef struct {
  uint64_t key; /* the magnitude: the bit pattern with the sign cleared */
  size_t index;
} ranked_t;

static int by_magnitude_then_index(const void* a, const void* b) {
  const ranked_t *x = a, *y = b;
  if (x->key != y->key) return x->key > y->key ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

static int by_index(const void* a, const void* b) {
  const ranked_t *x = a, *y = b;
  return x->index < y->index ? -1 : x->index > y->index;
}

static double get(const char* p, int f64, size_t i) {
  if (f64) return ((const double*)p)[i];
  return ((const float*)p)[i];
}

static void set(char* p, int f64, size_t i, double v) {
  if (f64)
    ((double*)p)[i] = v;
  else
    ((float*)p)[i] = (float)v;
}

static uint64_t key(const char* p, int f64, size_t i) {
  if (f64) {
    uint64_t b;
    memcpy(&b, p + 8 * i, 8);
    return b & 0x7fffffffffffffffull;
  }
  uint32_t b;
  memcpy(&b, p + 4 * i, 4);
  return b & 0x7fffffffu;
}

/* Each buffer must be this GPU's fake memory, as CUDA would refuse another GPU's. */
static int on(int device, const void* p, const char* what, char* why, size_t why_len) {
  return fake_device_check_memory(device, p, "topk", what, why, why_len);
}

int fake_topk_feedback(int device, int64_t stream, void* acc, const void* grad, int dtype, size_t n,
                       size_t k, void* indices, int index_dtype, void* values, char* why,
                       size_t why_len) {
  if (on(device, acc, "acc", why, why_len) || on(device, grad, "grad", why, why_len) ||
      on(device, indices, "indices", why, why_len) || on(device, values, "values", why, why_len))
    return -1;
  int f64 = dtype == HVDS_FLOAT64;
  size_t es = f64 ? 8 : 4, is = index_dtype == HVDS_INT64 ? 8 : 4;
  char* a = calloc(n + 1, es);
  char* g = calloc(n + 1, es);
  ranked_t* r = calloc(n + 1, sizeof(ranked_t));
  char* out_idx = calloc(k + 1, is);
  char* out_val = calloc(k + 1, es);
  fake_device_read_memory(a, acc, n * es);
  if (grad != NULL) fake_device_read_memory(g, grad, n * es);
  for (size_t i = 0; i < n; i++) {
    set(a, f64, i, get(a, f64, i) + get(g, f64, i));
    r[i] = (ranked_t){key(a, f64, i), i};
  }
  qsort(r, n, sizeof(ranked_t), by_magnitude_then_index);
  size_t taken = 0;
  while (taken < k && taken < n && r[taken].key != 0) taken++;
  qsort(r, taken, sizeof(ranked_t), by_index);
  for (size_t j = 0; j < taken; j++) {
    if (is == 8)
      ((int64_t*)out_idx)[j] = (int64_t)r[j].index;
    else
      ((int32_t*)out_idx)[j] = (int32_t)r[j].index;
    set(out_val, f64, j, get(a, f64, r[j].index));
    set(a, f64, r[j].index, 0);
  }
  fake_device_write_memory(acc, a, n * es);
  fake_device_write_memory(indices, out_idx, k * is);
  fake_device_write_memory(values, out_val, k * es);
  fake_device_count_topk(stream);
  free(a), free(g), free(r), free(out_idx), free(out_val);
  return 0;
}
