/* A process forked after init (state.h): how it knows it is one, and the error its operations
 * give. Kept apart from the API's lifecycle so that the layers below it need not call up into
 * the API to ask. Every operation asks, so the answer must not cost a system call: this
 * process's pid is kept here and refreshed in the child of every fork(). */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "state.h"

static _Atomic pid_t this_process; /* getpid(), as of init or the last fork() into this process */
static pthread_once_t refresh_registered = PTHREAD_ONCE_INIT;

static void refresh_in_child(void) {
  atomic_store_explicit(&this_process, getpid(), memory_order_relaxed);
}

static void register_refresh(void) { pthread_atfork(NULL, NULL, refresh_in_child); }

void hvds__forked_copy_own(hvds_runtime_t* rt) {
  pthread_once(&refresh_registered, register_refresh);
  pid_t self = getpid();
  atomic_store_explicit(&this_process, self, memory_order_relaxed);
  rt->owner_pid = self;
}

int hvds__forked_copy(hvds_runtime_t* rt) {
  return rt->owner_pid != 0 &&
         atomic_load_explicit(&this_process, memory_order_relaxed) != rt->owner_pid;
}

hvds_result_t hvds__forked_error(hvds_runtime_t* rt, const char* what) {
  return hvds__set_error(HVDS_INVALID_USAGE,
                         "%s: this process (pid %d) was forked from rank %d (pid %d) after "
                         "hvd.init(); a forked process cannot communicate: collectives run only "
                         "in the process that called init",
                         what, (int)getpid(), rt->rank, (int)rt->owner_pid);
}
