/* The point-to-point transports the world communicator can be built on, by the name
 * HVDSPARSE_TRANSPORT gives, with what the runtime must know about each. (Shared memory among
 * the ranks of a host is not chosen here: hierarchy.c puts it under the world's ranks of each
 * host when they can attach.) */
#ifndef HVDS_TRANSPORTS_H_
#define HVDS_TRANSPORTS_H_

#include <stddef.h>

#include "p2p.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  const char* name;
  /* Connects the full mesh of size ranks through the rendezvous kv (see tcp_p2p.h). */
  hvds_result_t (*create)(const hvds_kv_t* kv, const char* prefix, int rank, int size,
                          const char* iface, const char* hostname, int timeout_ms,
                          hvds_p2p_t** out, char* err, size_t errlen);
  /* 1 when the transport's own threads carry the data (a coordinator at raised priority
   * would keep the core from them). */
  int own_threads;
  /* 1 when shared memory may replace this world when every rank shares one host (0 keeps it:
   * a Gloo world on one host is how Gloo itself is run and tested). */
  int shm_may_replace;
  /* Optional: how long a wait polls before it sleeps (tcp_polling.h), on the world and every
   * view of it. */
  void (*set_poll_us)(hvds_p2p_t* world, int us);
} hvds_transport_t;

/* The transport of that name; NULL (the default) is "tcp". NULL for an unknown name. */
const hvds_transport_t* hvds__transport_find(const char* name);
/* "tcp or gloo": the names, for error messages. */
const char* hvds__transport_names(void);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_TRANSPORTS_H_ */
