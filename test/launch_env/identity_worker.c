/* Prints what hvds_init learned about this rank, for the launch tests:
 * "IDENTITY rank=R size=S local_rank=L local_size=LS cross_rank=C cross_size=CS".
 * Exits 1 with the runtime's message when init fails. */
#include <stdio.h>

#include "hvdsparse.h"

int main(void) {
  hvds_result_t rc = hvds_init();
  if (rc != HVDS_SUCCESS) {
    fprintf(stderr, "INIT FAILED %s: %s\n", hvds_result_str(rc), hvds_last_error());
    return 1;
  }
  printf("IDENTITY rank=%d size=%d local_rank=%d local_size=%d cross_rank=%d cross_size=%d\n",
         hvds_rank(), hvds_size(), hvds_local_rank(), hvds_local_size(), hvds_cross_rank(),
         hvds_cross_size());
  fflush(stdout);
  return hvds_shutdown() == HVDS_SUCCESS ? 0 : 1;
}
