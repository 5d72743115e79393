/* Start-up: identity from the environment, rendezvous through the store, the Gloo mesh, and the
 * local and cross groups. */
#ifndef HVDS_BOOTSTRAP_H_
#define HVDS_BOOTSTRAP_H_

#include "hvdsparse.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fills rt's identity, store, world/local/cross communicators. On failure cleans up and
 * records the message with hvds__set_error. */
hvds_result_t hvds__bootstrap(void);
/* Closes what bootstrap opened. */
void hvds__bootstrap_teardown(void);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_BOOTSTRAP_H_ */
