/* Rendezvous key-value store: client and server.
 *
 * The launcher (or rank 0 when no launcher is used) serves one store per job. Workers exchange
 * addresses and small control data through it. Every client must present the job's secret first;
 * the server refuses (and logs) any connection that does not. Keys are strings, values bytes.
 */
#ifndef HVDS_STORE_H_
#define HVDS_STORE_H_

#include <stddef.h>
#include <stdint.h>

#include "hvdsparse.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hvds_store hvds_store_t;
typedef struct hvds_store_server hvds_store_server_t;

/* Connects and authenticates, retrying refused connections until timeout_ms. On failure returns
 * HVDS_TIMEOUT, HVDS_SYSTEM_ERROR or HVDS_INVALID_ARGUMENT (wrong secret) and writes why to err. */
hvds_result_t hvds__store_connect(const char* host, int port, const char* secret, int timeout_ms,
                                  hvds_store_t** out /* OUT */, char* err, size_t errlen);
/* Sets key to a copy of len bytes (overwrites). */
hvds_result_t hvds__store_set(hvds_store_t* s, const char* key, const void* val, size_t len);
/* Waits until key exists, up to timeout_ms (0: do not wait; HVDS_TIMEOUT if absent), and returns
 * a malloc'd copy that the caller frees. */
hvds_result_t hvds__store_get(hvds_store_t* s, const char* key, int timeout_ms,
                              void** val /* OUT */, size_t* len /* OUT */);
/* Atomically adds delta to the integer stored at key (absent = 0); *result gets the new value. */
hvds_result_t hvds__store_add(hvds_store_t* s, const char* key, int64_t delta,
                              int64_t* result /* OUT */);
/* As set and add, giving up after timeout_ms without a reply (< 0: never). A request that timed
 * out breaks the connection (its late reply would answer the next request): it returns
 * HVDS_TIMEOUT, and every later call fails at once (hvds__store_lost() says why). For requests
 * that must not hold up their caller, such as those made while a rank stops. */
hvds_result_t hvds__store_set_within(hvds_store_t* s, const char* key, const void* val, size_t len,
                                     int timeout_ms);
hvds_result_t hvds__store_add_within(hvds_store_t* s, const char* key, int64_t delta,
                                     int64_t* result /* OUT */, int timeout_ms);
/* How long a request made while a rank stops or fails waits for a reply: the store may have
 * stopped answering in the same event (its host cut off or stopped), and a failure must stay a
 * failure, not become a hang. */
#define HVDS_STORE_STOPPING_REPLY_MS 2000
/* Adds 1 to count_key and, when that made it 1 (the first caller), sets key to val, each request
 * given up after timeout_ms as above. Returns 1 when this caller was first and the set succeeded;
 * 0 otherwise. */
int hvds__store_set_first(hvds_store_t* s, const char* count_key, const char* key, const void* val,
                          size_t len, int timeout_ms);
/* As get, giving up reply_ms after its own wait (timeout_ms, >= 0) without a reply, as above
 * (get itself allows a minute). */
hvds_result_t hvds__store_get_within(hvds_store_t* s, const char* key, int timeout_ms, int reply_ms,
                                     void** val /* OUT */, size_t* len /* OUT */);
/* Deletes every key that starts with prefix. */
hvds_result_t hvds__store_delete_prefix(hvds_store_t* s, const char* prefix);
/* The IPv4 address this client's connection leaves from ("a.b.c.d" into out), which is the
 * address through which the store's host, and so most likely the job's other hosts, reach this
 * one. Returns 0 on success. */
int hvds__store_local_addr(const hvds_store_t* s, char* out, size_t outlen);
/* Why the connection to the store broke (the server closed it, or it failed), or NULL while it
 * works. Every call after a break fails at once with HVDS_SYSTEM_ERROR. The text stays valid
 * until hvds__store_close(). */
const char* hvds__store_lost(hvds_store_t* s);
/* Closes the connection. Accepts NULL. */
void hvds__store_close(hvds_store_t* s);

/* Starts a server thread listening on bind_addr (NULL or "" = all interfaces) and port (0 picks
 * a free one, written to *port_out). Only clients presenting secret are served. */
hvds_result_t hvds__store_server_start(const char* bind_addr, int port, const char* secret,
                                       hvds_store_server_t** out /* OUT */, int* port_out);
/* Sets a key from inside the serving process (e.g. the launcher records a failed rank). */
hvds_result_t hvds__store_server_set(hvds_store_server_t* srv, const char* key, const void* val,
                                     size_t len);
/* Copies the value of key, read from inside the serving process, into out (at most cap - 1 bytes,
 * NUL-terminated); returns 1, or 0 when the key is absent. */
int hvds__store_server_get(hvds_store_server_t* srv, const char* key, char* out, size_t cap);
/* Number of connections refused for a wrong secret or a bad first message (for tests and logs). */
int hvds__store_server_refused(hvds_store_server_t* srv);
/* Stops the thread, closes every connection, frees everything. Accepts NULL. */
void hvds__store_server_stop(hvds_store_server_t* srv);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_STORE_H_ */
