/* Elastic jobs: a worker's identity comes from the launcher's store at every init, not from its
 * environment, so that a worker that survives a failure re-joins with the rank and size the
 * launcher assigns anew. */
#ifndef HVDS_ELASTIC_JOIN_H_
#define HVDS_ELASTIC_JOIN_H_

#include "state.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Connects rt->store to addr:port when not yet connected, waits (up to HVDSPARSE_ELASTIC_TIMEOUT)
 * for a membership newer than the one this process joined last, and takes its identity from it:
 * rank, size, local and cross ranks, rt->generation = the membership's epoch and rt->job =
 * "<job>.e<epoch>", so that every key of this init is the membership's own. host is this
 * worker's host name; with HVDSPARSE_LOCAL_RANK as given at spawn it names the worker.
 * On error rt->store may stay open (bootstrap's teardown closes it); the message is recorded. */
hvds_result_t hvds__elastic_join(hvds_runtime_t* rt, const char* addr, int port, const char* host);

/* The store as the transports' key-value callbacks during an elastic rendezvous (ctx is the
 * runtime): as hvds__store_set and hvds__store_get, except that a wait for a key gives up with
 * HVDS_REMOTE_ERROR as soon as the launcher publishes a newer membership, since a worker of this
 * one failed and will never publish its key. */
hvds_result_t hvds__elastic_kv_set(void* ctx, const char* key, const void* val, size_t len);
hvds_result_t hvds__elastic_kv_get(void* ctx, const char* key, int timeout_ms, void** val,
                                   size_t* len);

/* The newest membership the launcher published, read from rt->store; -1 when unreadable. */
int64_t hvds__elastic_published_epoch(hvds_runtime_t* rt);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_ELASTIC_JOIN_H_ */
