/* hvds__copy (copy.h): memcpy, or a vector loop where memcpy's string copy would crawl; the
 * streaming copy. */
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
/* Copies the 64-byte groups of n bytes with unaligned loads and `store` (SSE2, which every
 * x86-64 has); returns how many bytes that was. */
#define DEFINE_COPY_64(name, store)                                   \
  static size_t name(char* d, const char* s, size_t n) {              \
    size_t i = 0;                                                     \
    for (; i + 64 <= n; i += 64) {                                    \
      __m128i a = _mm_loadu_si128((const __m128i*)(s + i));           \
      __m128i b = _mm_loadu_si128((const __m128i*)(s + i + 16));      \
      __m128i c = _mm_loadu_si128((const __m128i*)(s + i + 32));      \
      __m128i e = _mm_loadu_si128((const __m128i*)(s + i + 48));      \
      store((__m128i*)(d + i), a);                                    \
      store((__m128i*)(d + i + 16), b);                               \
      store((__m128i*)(d + i + 32), c);                               \
      store((__m128i*)(d + i + 48), e);                               \
    }                                                                 \
    return i;                                                         \
  }
DEFINE_COPY_64(copy_64_cached, _mm_storeu_si128)
DEFINE_COPY_64(copy_64_streamed, _mm_stream_si128) /* d 16-byte aligned */
#endif

void hvds__copy(void* dst, const void* src, size_t n) {
#if HAVE_VECTOR_LOOP
  if (hvds__copy_avoids_memcpy(dst, src, n)) {
    size_t done = copy_64_cached((char*)dst, (const char*)src, n);
    memcpy((char*)dst + done, (const char*)src + done, n - done);  // under 64: no string copy
    return;
  }
#endif
  memcpy(dst, src, n);
}

void hvds__stream_copy(void* dst, const void* src, size_t len) {
#if HAVE_VECTOR_LOOP
  char* d = (char*)dst;
  const char* s = (const char*)src;
  size_t head = (16 - ((uintptr_t)d & 15)) & 15;
  if (head > len) head = len;
  memcpy(d, s, head);
  size_t done = head + copy_64_streamed(d + head, s + head, len - head);
  memcpy(d + done, s + done, len - done);
#else
  memcpy(dst, src, len);
#endif
}

void hvds__store_fence(void) {
#if HAVE_VECTOR_LOOP
  _mm_sfence();
#endif
}

int hvds__stream_copy_exists(void) { return HAVE_VECTOR_LOOP; }
