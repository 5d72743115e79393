/* A process forked after init (state.h): how it knows it is one, and the error its operations
 * give. Kept apart from the API's lifecycle so that the layers below it need not call up into
 * the API to ask. */
#include <unistd.h>

#include "state.h"

int hvds__forked_copy(hvds_runtime_t* rt) {
  return rt->owner_pid != 0 && getpid() != rt->owner_pid;
}

hvds_result_t hvds__forked_error(hvds_runtime_t* rt, const char* what) {
  return hvds__set_error(HVDS_INVALID_USAGE,
                         "%s: this process (pid %d) was forked from rank %d (pid %d) after "
                         "hvd.init(); a forked process cannot communicate: collectives run only "
                         "in the process that called init",
                         what, (int)getpid(), rt->rank, (int)rt->owner_pid);
}
