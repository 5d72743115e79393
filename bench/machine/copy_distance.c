/* What a copy costs by where its destination lies against its source within the page: the C
 * library's memcpy against the runtime's hvds__copy (ops/copy.h), in the blocks a
 * shared-memory allreduce copies between a malloc'ed tensor and a page-aligned slot.
 *
 *   copy_distance [TOTAL [BLOCK]]   (SIZE suffixes K and M; defaults 1536K and 8K)
 *
 * For each distance (dst - src modulo 4096: 0, 8, 16, 32, 64, 2048 bytes) prints the best of
 * 50 passes, each copying TOTAL bytes in BLOCK-byte copies, in us and GB/s, for both. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "copy.h"

#define PASSES 50

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static size_t parse_size(const char* s) {
  char* end;
  double v = strtod(s, &end);
  if (*end == 'M') v *= 1024.0 * 1024.0;
  if (*end == 'K') v *= 1024.0;
  return (size_t)v;
}

/* The best pass over TOTAL bytes in BLOCK-byte copies with `copy`. */
static double best_pass(void (*copy)(void*, const void*, size_t), char* dst, const char* src,
                        size_t total, size_t block) {
  double best = 1e30;
  for (int p = 0; p < PASSES; p++) {
    double t0 = now_us();
    for (size_t at = 0; at < total; at += block)
      copy(dst + at, src + at, total - at < block ? total - at : block);
    double t = now_us() - t0;
    if (t < best) best = t;
  }
  return best;
}

static void libc_copy(void* dst, const void* src, size_t n) { memcpy(dst, src, n); }

int main(int argc, char** argv) {
  size_t total = argc > 1 ? parse_size(argv[1]) : (size_t)1536 << 10;
  size_t block = argc > 2 ? parse_size(argv[2]) : (size_t)8 << 10;
  if (total == 0 || block == 0) {
    fprintf(stderr, "usage: copy_distance [TOTAL [BLOCK]]\n");
    return 2;
  }
  char* src = aligned_alloc(4096, total + 8192);
  char* dst = aligned_alloc(4096, total + 8192);
  if (src == NULL || dst == NULL) return 1;
  memset(src, 1, total + 8192);
  memset(dst, 2, total + 8192);
  printf("%zu bytes in copies of %zu: best of %d passes\n", total, block, PASSES);
  printf("distance  memcpy us (GB/s)   hvds__copy us (GB/s)\n");
  const size_t distances[] = {0, 8, 16, 32, 64, 2048};
  for (size_t i = 0; i < sizeof distances / sizeof distances[0]; i++) {
    char* d = dst + distances[i];
    double libc = best_pass(libc_copy, d, src, total, block);
    double ours = best_pass(hvds__copy, d, src, total, block);
    printf("%8zu  %9.1f (%5.1f)   %9.1f (%5.1f)\n", distances[i], libc, total / libc / 1e3, ours,
           total / ours / 1e3);
  }
  free(src);
  free(dst);
  return 0;
}
