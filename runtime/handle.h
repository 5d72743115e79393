/* Handle table: what the framework waits on. Slots are reused; an id carries its slot's
 * generation so a stale id never finds a newer handle. All functions take rt->hmu themselves. */
#ifndef HVDS_HANDLE_H_
#define HVDS_HANDLE_H_

#include "state.h"

/* A binding's wait returns every slice to see Ctrl-C: a wait starting within this many
 * seconds of the last one's end continues it. */
#define HVDS_WAIT_SLICE_GAP_S 0.1

#ifdef __cplusplus
extern "C" {
#endif

/* Seconds this process has been blocked in hvds_wait() with no operation finishing; 0 when no
 * thread waits. */
double hvds__stuck_seconds(hvds_runtime_t* rt, double now);
/* Creates a pending handle for n entries. Returns NULL when out of memory. */
hvds_handle_rec_t* hvds__handle_create(hvds_runtime_t* rt, int32_t n);
/* Marks one entry done. The first failure's status and message win. Frees the record when the
 * last entry completes on a handle the caller already released. Coordinator thread. */
void hvds__handle_complete(hvds_runtime_t* rt, hvds_handle_rec_t* h, hvds_result_t status,
                           const char* message);
/* Completes one entry of each of hs[0..n) (NULLs skipped) under one lock, one wake-up. */
void hvds__handle_complete_many(hvds_runtime_t* rt, hvds_handle_rec_t** hs, int32_t n,
                                hvds_result_t status, const char* message);
/* Looks up an id; returns NULL for unknown ids. Call with rt->hmu held. */
hvds_handle_rec_t* hvds__handle_find_locked(hvds_runtime_t* rt, hvds_handle_t id);
/* Frees every record (shutdown with nothing pending). */
void hvds__handle_table_free(hvds_runtime_t* rt);
/* hvds_release() (hvdsparse.h) on a given runtime. */
void hvds__release(hvds_runtime_t* rt, hvds_handle_t id);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_HANDLE_H_ */
