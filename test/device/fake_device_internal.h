/* What the fake device library's files share (fake_device_library.c: memory and staging;
 * fake_device_route.c: the NCCL route). */
#ifndef HVDS_TEST_FAKE_DEVICE_INTERNAL_H_
#define HVDS_TEST_FAKE_DEVICE_INTERNAL_H_

#include <stddef.h>
#include <stdint.h>

#include "device_api.h"
#include "fake_device_library.h"
#include "hvdsparse.h"

#define EXPORT __attribute__((visibility("default")))

/* The fake GPU memory, read and written by the library itself (not counted as copies). */
void fake_device_read_memory(void* host, const void* device_memory, size_t bytes);
void fake_device_write_memory(void* device_memory, const void* host, size_t bytes);
/* An event: a producer's ready event, or a queued copy's completion (bytes > 0 until it
 * landed). */
typedef struct {
  int64_t stream;
  void* dst;
  const void* src;
  size_t bytes;
  void* group; /* a launch's event: the group whose round it follows, else NULL */
  long round;  /* that round: complete once the group completed it */
} fake_event_t;
/* Moves a queued copy's bytes (at the wait, or when the event is freed). */
void fake_event_settle(fake_event_t* ev);

/* The GPU of the allocation holding p, or -1. */
int fake_device_of(const void* p);
/* 0 when p is NULL or memory of GPU device, else -1 with why naming what (as CUDA refuses
 * another GPU's memory); who names the caller. */
int fake_device_check_memory(int device, const void* p, const char* who, const char* what,
                             char* why, size_t why_len);

void* fake_route_context(int device, int timeout_ms, char* why, size_t why_len);
void* fake_route_comm_create(void* context, int rank, int size, hvds_device_bcast_fn bcast,
                             void* bctx, char* why, size_t why_len);
void fake_route_comm_destroy(void* comm);
void* fake_route_ready_event(int device, int64_t stream, char* why, size_t why_len);
void fake_route_event_free(void* event);
int fake_route_allreduce(void* comm, const void* const* inputs, void* const* outputs,
                         const size_t* counts, int n, int dtype, int op, double prescale,
                         double postscale, void* const* ready, int nready, hvds_device_done_fn done,
                         void* done_arg, char* why, size_t why_len);

int fake_route_allgather(void* comm, const void* input, void* output, const size_t* bytes,
                         void* const* ready, int nready, hvds_device_done_fn done, void* done_arg,
                         char* why, size_t why_len);
int fake_route_reducescatter(void* comm, const void* input, void* output, const size_t* counts,
                             int dtype, int op, double prescale, double postscale,
                             void* const* ready, int nready, hvds_device_done_fn done,
                             void* done_arg, char* why, size_t why_len);

int fake_route_broadcast(void* comm, void* buf, size_t bytes, int root, void* const* ready,
                         int nready, hvds_device_done_fn done, void* done_arg, char* why,
                         size_t why_len);
int fake_route_alltoall(void* comm, const void* input, const size_t* send_bytes, void* output,
                        const size_t* recv_bytes, void* const* ready, int nready,
                        hvds_device_done_fn done, void* done_arg, char* why, size_t why_len);
void* fake_route_launch_event(void* comm, char* why, size_t why_len);
void* fake_route_comm_pair(void* local, void* cross, char* why, size_t why_len);
int fake_route_stream_wait(void* event, int device, int64_t stream, char* why, size_t why_len);

int fake_topk_feedback(int device, int64_t stream, void* acc, const void* grad, int dtype, size_t n,
                       size_t k, void* indices, int index_dtype, void* values, char* why,
                       size_t why_len);
/* Counts a top-k selection queued on stream (fake_device_stats_t). */
void fake_device_count_topk(int64_t stream);

int fake_quant_encode(int device, int64_t stream, const void* src, size_t n, int dtype, int bits,
                      uint64_t seed, void* dst, char* why, size_t why_len);
int fake_quant_decode(int device, int64_t stream, const void* src, size_t n, int bits, int dtype,
                      void* dst, char* why, size_t why_len);
/* Counts a quantizer call queued on stream (fake_device_stats_t). */
void fake_device_count_quant(int64_t stream);

#endif /* HVDS_TEST_FAKE_DEVICE_INTERNAL_H_ */
