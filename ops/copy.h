/* Copying bytes on the data path: memcpy, except where the C library's copy is known to crawl,
 * and the streaming copy that writes past the caches. */
#ifndef HVDS_COPY_H_
#define HVDS_COPY_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* memcpy(dst, src, n) for buffers that do not overlap. Where dst lies 1-63 bytes past src
 * modulo 4096 (a malloc'ed tensor, 16 bytes past a page, copied from or to a page-aligned
 * slot or fusion buffer), glibc's copy of 4-512 KiB takes its `rep movsb` path, which
 * on some processors stalls on every load that seems to alias an earlier store: 8 KiB blocks
 * at 3 GB/s against 25-35 GB/s at any other distance (AMD EPYC, glibc 2.36). Those copies run
 * a vector loop instead; every other copy is memcpy's. */
void hvds__copy(void* dst, const void* src, size_t n);

/* 1 where (dst, src, n) is a copy hvds__copy takes away from memcpy (tests, benchmarks). */
int hvds__copy_avoids_memcpy(const void* dst, const void* src, size_t n);

/* Copies len bytes to dst with non-temporal stores where the processor has them (memcpy
 * elsewhere), past the caches to memory; hvds__store_fence must run before a peer is told the
 * bytes are there. */
void hvds__stream_copy(void* dst, const void* src, size_t len);
/* Orders the streaming stores before the stores that follow. */
void hvds__store_fence(void);
/* 1 where hvds__stream_copy streams. */
int hvds__stream_copy_exists(void);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_COPY_H_ */
