/* Large sparse buffers reused across calls on the same thread.
 *
 * Every sparse allreduce allocates and frees buffers of about the same sizes (streams, blocks
 * to send and receive); fresh pages fault in on each call, and on the development VM that was
 * a quarter of a split-allgather's time. Freed buffers of 64 KiB or more are kept per thread
 * (up to 8 of them and 128 MiB in all) and handed out again for requests they fit (at most
 * twice the size asked for). Kept buffers are ordinary malloc blocks: anything from
 * hvds__sparse_buf_alloc may be released with free() too (a result handed to a caller is), and
 * hvds__sparse_buf_free takes any malloc block. A thread's buffers are freed when it exits. */
#ifndef HVDS_SPARSE_POOL_H_
#define HVDS_SPARSE_POOL_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* As malloc(bytes) (bytes 0: a 1-byte block). */
void* hvds__sparse_buf_alloc(size_t bytes);
/* As free(p), keeping p for reuse when it is large and the thread's pool has room. */
void hvds__sparse_buf_free(void* p);
/* Bytes this thread keeps (tests). */
size_t hvds__sparse_buf_kept(void);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_SPARSE_POOL_H_ */
