/* The table of world transports (transports.h). */
#include "transports.h"

#include <string.h>

#include "gloo_p2p.h"
#include "tcp_p2p.h"

static const hvds_transport_t kTransports[] = {
    {"tcp", hvds__tcp_p2p_create, 0, 1, hvds__tcp_p2p_set_poll_us},
    {"gloo", hvds__gloo_p2p_create, 1, 0, NULL},
};

#define NUM_TRANSPORTS (sizeof kTransports / sizeof kTransports[0])

const hvds_transport_t* hvds__transport_find(const char* name) {
  if (name == NULL) return &kTransports[0];
  for (size_t i = 0; i < NUM_TRANSPORTS; i++)
    if (strcmp(kTransports[i].name, name) == 0) return &kTransports[i];
  return NULL;
}

const char* hvds__transport_names(void) { return "tcp or gloo"; }
