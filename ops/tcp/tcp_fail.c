/* A TCP communicator's failure (tcp_internal.h): the first cause is kept, every connection is
 * shut down so the peers blocked on this rank fail at once, and a waiter here is woken. */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "tcp_internal.h"

void hvds__tcp_wake(tcp_t* t) {
  uint64_t one = 1;
  if (write(t->event_fd, &one, sizeof one) < 0 && errno != EAGAIN) {
    HVDS_DEBUG("tcp p2p eventfd write: %s", strerror(errno));
  }
}

hvds_result_t hvds__tcp_fail(tcp_t* t, hvds_result_t rc, int peer, const char* fmt, ...) {
  hvds_p2p_t* p = t->p;
  int first = 0;
  pthread_mutex_lock(&t->mu);
  if (!atomic_load(&t->failed)) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->error, sizeof p->error, fmt, ap);
    va_end(ap);
    p->failed_peer = peer;
    t->fail_rc = rc;
    atomic_store(&t->failed, 1);
    first = 1;
  }
  rc = t->fail_rc;
  pthread_mutex_unlock(&t->mu);
  if (first) {
    HVDS_DEBUG("tcp p2p rank %d failed: %s", p->rank, p->error);
    // FIN on every connection (the descriptors stay open until destroy): peers fail at once.
    for (int i = 0; i < p->size; i++)
      if (t->peers[i].fd >= 0) shutdown(t->peers[i].fd, SHUT_RDWR);
    hvds__tcp_wake(t);
  }
  return rc;
}
