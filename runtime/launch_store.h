/* The rendezvous store of a job started by another engine (mpirun, srun, torchrun): rank 0
 * serves it in-process for the life of one init, and keeps it up at shutdown until every rank
 * has said it is done with it.
 *
 * Shutdown and re-init: rank 0 stops the server once every rank that reached it has added itself
 * to the generation's "done" count (or after wait_ms), then a re-init starts a new server on the same
 * port. The server records which init (generation) it serves, and the other ranks wait until
 * the store they reach serves their generation, so a fast rank never talks to the old one. */
#ifndef HVDS_LAUNCH_STORE_H_
#define HVDS_LAUNCH_STORE_H_

#include <stddef.h>

#include "hvdsparse.h"
#include "launch_env.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hvds_launch_store hvds_launch_store_t;
struct hvds_store;

/* Rank 0 starts serving at env->bind_addr:env->store_port for clients presenting secret ("" for
 * none). Other ranks wait, up to timeout_ms, until env->store_addr:store_port serves this
 * generation. The caller then connects as usual and frees *out with hvds__launch_store_close.
 * On failure returns HVDS_SYSTEM_ERROR (cannot listen), HVDS_TIMEOUT or HVDS_INVALID_ARGUMENT
 * (wrong secret), writes why to err, and *out is NULL. */
hvds_result_t hvds__launch_store_open(const hvds_launch_env_t* env, const char* secret,
                                      int generation, int timeout_ms,
                                      hvds_launch_store_t** out /* OUT */, char* err,
                                      size_t errlen);

/* Says this rank is done with the store through store (NULL when it never connected). On rank 0
 * then waits up to wait_ms for every rank that reached the store to say so (ranks that never
 * came are not waited for) and stops the server. Call before closing store. Frees ls; accepts
 * NULL; cannot fail. */
void hvds__launch_store_close(hvds_launch_store_t* ls, struct hvds_store* store, int wait_ms);

/* How many clients rank 0's server refused (a wrong secret, a bad greeting); 0 on other ranks. */
int hvds__launch_store_refused(const hvds_launch_store_t* ls);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_LAUNCH_STORE_H_ */
