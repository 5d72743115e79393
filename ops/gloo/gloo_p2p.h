/* The point-to-point interface over Gloo's TCP transport (C++ shim; C ABI only). */
#ifndef HVDS_GLOO_P2P_H_
#define HVDS_GLOO_P2P_H_

#include <stddef.h>

#include "../p2p.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where a rank publishes its address and reads its peers': a key-value store given as callbacks,
 * so the shim does not depend on any store implementation. get() waits up to timeout_ms and
 * returns a malloc'd value the shim frees. */
typedef struct {
  void* ctx;
  hvds_result_t (*set)(void* ctx, const char* key, const void* val, size_t len);
  hvds_result_t (*get)(void* ctx, const char* key, int timeout_ms, void** val, size_t* len);
} hvds_kv_t;

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
