/* The public API of elastic jobs: whether the launcher's membership moved on. */
#include <pthread.h>

#include "elastic_join.h"
#include "param.h"
#include "state.h"

int hvds_elastic_hosts_updated(void) {
  hvds_runtime_t* rt = &hvds__rt;
  if (hvds__forked_copy(rt) || !hvds__param_int(HVDS_PARAM_ELASTIC)) return -1;
  // life_mu keeps shutdown from closing the store under the request.
  pthread_mutex_lock(&rt->life_mu);
  int updated = -1;
  if (atomic_load(&rt->initialized)) {
    int64_t published = hvds__elastic_published_epoch(rt);
    updated = published < 0 ? -1 : published > rt->elastic_epoch;
  }
  pthread_mutex_unlock(&rt->life_mu);
  return updated;
}
