/* The point-to-point interface over Gloo's TCP transport (C++ shim; C ABI only). */
#ifndef HVDS_GLOO_P2P_H_
#define HVDS_GLOO_P2P_H_

#include <stddef.h>

#include "p2p.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Connects a full mesh among size ranks: each rank publishes its listening address under
 * "<prefix>/<rank>" and connects to the others. iface (NULL or "" = loopback) names the network
 * interface; hostname (or NULL) may be given instead as the address to bind to. timeout_ms
 * bounds the rendezvous and is the default timeout of every later wait. Blocks until connected.
 * On failure writes why to err. */
hvds_result_t hvds__gloo_p2p_create(const hvds_kv_t* kv, const char* prefix, int rank, int size,
                                    const char* iface, const char* hostname, int timeout_ms,
                                    hvds_p2p_t** out /* OUT */, char* err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_GLOO_P2P_H_ */
