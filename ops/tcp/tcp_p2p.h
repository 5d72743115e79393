/* The point-to-point interface (ops/p2p.h) over plain TCP sockets, progressed in the caller's
 * thread: no internal thread, eager sends, one full mesh of connections per communicator. */
#ifndef HVDS_TCP_P2P_H_
#define HVDS_TCP_P2P_H_

#include <stddef.h>

#include "p2p.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Connects a full mesh among size ranks: each rank listens on the IPv4 address of iface (NULL or
 * "" = none), else of hostname (NULL or "" = 127.0.0.1), publishes "ip:port" under
 * "<prefix>/addr/<rank>" through kv, and connects to the lower ranks while accepting the higher
 * ones. timeout_ms (<= 0: none) bounds the rendezvous and is the default timeout of every later
 * wait. Blocks until every rank is connected. On success *out is a communicator whose destroy
 * frees it; on failure *out is NULL, nothing is leaked and err says why.
 *
 * Threading: one thread at a time calls isend/irecv/wait/bell_wait/bell_ring (they progress
 * every connection in that thread); abort and bell_interrupt may be called from any thread. */
hvds_result_t hvds__tcp_p2p_create(const hvds_kv_t* kv, const char* prefix, int rank, int size,
                                   const char* iface, const char* hostname, int timeout_ms,
                                   hvds_p2p_t** out /* OUT */, char* err, size_t errlen);

/* A wait first polls its sockets without sleeping for up to us microseconds (0: blocks in
 * poll() at once). Polling answers a message that is about to arrive without the cost of a
 * sleep and a wake-up; it pays off when every rank of the host has a core of its own. */
void hvds__tcp_p2p_set_poll_us(hvds_p2p_t* p, int us);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_TCP_P2P_H_ */
