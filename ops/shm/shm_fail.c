/* A shared-memory communicator's failure (shm_internal.h): the first cause is kept and published
 * in the segment's header, and every peer is woken to meet it. */
#include <stdarg.h>
#include <stdio.h>

#include "log.h"
#include "shm_internal.h"

hvds_result_t hvds__shm_fail(shm_t* s, hvds_result_t rc, int culprit, const char* fmt, ...) {
  hvds_p2p_t* p = s->p;
  int first = 0;
  pthread_mutex_lock(&s->mu);
  if (!atomic_load(&s->failed)) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->error, sizeof p->error, fmt, ap);
    va_end(ap);
    p->failed_peer = culprit;
    s->fail_rc = rc;
    atomic_store(&s->failed, 1);
    first = 1;
  }
  rc = s->fail_rc;
  pthread_mutex_unlock(&s->mu);
  if (!first || s->hdr == NULL) return rc;
  HVDS_DEBUG("shm p2p rank %d failed: %s", p->rank, p->error);
  // Tell every peer, unless one already told us (then its failure is the one to report).
  snprintf(s->me->why, sizeof s->me->why, "%.199s", p->error);
  int32_t none = 0;
  if (atomic_compare_exchange_strong(&s->hdr->failed, &none, 1 + p->rank)) {
    for (int q = 0; q < p->size; q++)
      if (q != p->rank) hvds__shm_wake(s, q, 1);
  }
  return rc;
}
