/* What tests reach in the fake device library (fake_device_library.c) by dlsym. */
#ifndef HVDS_TEST_FAKE_DEVICE_LIBRARY_H_
#define HVDS_TEST_FAKE_DEVICE_LIBRARY_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  long copies_to_host, copies_to_device;
  long host_buffers;   /* page-locked buffers given out and not freed */
  long host_allocs;    /* page-locked buffers ever given out */
  long device_buffers; /* fake GPU allocations not freed */
  int64_t last_stream; /* the stream of the last copy */
  long topk_calls;     /* top-k selections (topk_feedback) */
  int64_t last_topk_stream; /* the stream of the last one */
  long synchronizes;        /* whole-GPU waits (synchronize) */
  int last_synchronized_device; /* the GPU of the last one */
  long quant_calls;             /* quantizer calls (quant_encode, quant_decode) */
  int64_t last_quant_stream;    /* the stream of the last one */
} fake_device_stats_t;

typedef void* (*fake_device_alloc_fn)(size_t bytes, int device);
typedef void (*fake_device_free_fn)(void* p);
typedef void (*fake_device_write_fn)(void* device_memory, const void* host, size_t bytes);
typedef void (*fake_device_read_fn)(void* host, const void* device_memory, size_t bytes);
typedef fake_device_stats_t (*fake_device_stats_fn)(void);
typedef struct {
  long calls;  /* allreduces launched through the route */
  long rounds; /* rounds completed (every rank's call of one allreduce) */
  long comms;  /* communicators alive */
  long events; /* ready events alive */
  int last_call_tensors, last_call_ready_events;
  int64_t last_event_stream; /* the stream of the last ready event recorded */
  int64_t last_ready_stream; /* the stream of the first ready event of the last call */
  long stream_waits;         /* streams made to wait for a launch's event */
  int64_t last_wait_stream;  /* the last such stream */
  int last_wait_pending;     /* 1: the launch had not completed when the stream was made to wait */
  long pair_calls;           /* allreduces launched on a hierarchical pair (comm_pair) */
} fake_route_stats_t;
typedef fake_route_stats_t (*fake_device_route_stats_fn)(void);
/* hold 1: launched allreduces wait (no completion) until hold 0. */
typedef void (*fake_device_hold_fn)(int hold);
/* From now on, the allreduces with a tensor on GPU device fail on every rank (-2: none). */
typedef void (*fake_device_fail_route_fn)(int device);

/* From now on, GPU device's copies to the host (to_host) and to the GPU (to_device) fail;
 * device -2: none. */
typedef void (*fake_device_fail_copies_fn)(int device, int to_host, int to_device);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_TEST_FAKE_DEVICE_LIBRARY_H_ */
