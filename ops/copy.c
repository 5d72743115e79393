/* hvds__copy (copy.h): memcpy, or a vector loop where memcpy's string copy would crawl. */
#include "copy.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <emmintrin.h>
#define HAVE_VECTOR_LOOP 1
#else
#define HAVE_VECTOR_LOOP 0
#endif

/* Distances (dst - src modulo the page) the string copy stalls on, and the smallest copy it
 * takes (smaller copies run glibc's vector code, whatever the distance). */
#define ALIAS_PAGE 4096u
#define ALIAS_DISTANCE 64u
#define STRING_COPY_MIN 2048u

int hvds__copy_avoids_memcpy(const void* dst, const void* src, size_t n) {
  uintptr_t distance = ((uintptr_t)dst - (uintptr_t)src) & (ALIAS_PAGE - 1);
  return HAVE_VECTOR_LOOP && n >= STRING_COPY_MIN && distance != 0 && distance < ALIAS_DISTANCE;
}

#if HAVE_VECTOR_LOOP
/* 64 bytes an iteration, unaligned loads and stores: SSE2, which every x86-64 has. */
static void vector_copy(char* d, const char* s, size_t n) {
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m128i a = _mm_loadu_si128((const __m128i*)(s + i));
    __m128i b = _mm_loadu_si128((const __m128i*)(s + i + 16));
    __m128i c = _mm_loadu_si128((const __m128i*)(s + i + 32));
    __m128i e = _mm_loadu_si128((const __m128i*)(s + i + 48));
    _mm_storeu_si128((__m128i*)(d + i), a);
    _mm_storeu_si128((__m128i*)(d + i + 16), b);
    _mm_storeu_si128((__m128i*)(d + i + 32), c);
    _mm_storeu_si128((__m128i*)(d + i + 48), e);
  }
  memcpy(d + i, s + i, n - i);  // under 64 bytes: no string copy
}
#endif

void hvds__copy(void* dst, const void* src, size_t n) {
#if HAVE_VECTOR_LOOP
  if (hvds__copy_avoids_memcpy(dst, src, n)) {
    vector_copy((char*)dst, (const char*)src, n);
    return;
  }
#endif
  memcpy(dst, src, n);
}
