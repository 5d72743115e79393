/* Local and cross identity for engines that do not give it: every rank's host name, gathered
 * over the world communicator, groups the ranks by host. */
#ifndef HVDS_LAUNCH_TOPOLOGY_H_
#define HVDS_LAUNCH_TOPOLOGY_H_

#include "hvdsparse.h"

#ifdef __cplusplus
extern "C" {
#endif

struct hvds_p2p;

/* What one rank knows of itself; the fields the engine did not give are HVDS_LAUNCH_UNKNOWN. */
typedef struct {
  int local_rank; /* rank among the ranks of this host */
  int local_size; /* ranks on this host */
  int cross_rank; /* index of this host among the hosts that have this local rank */
  int cross_size; /* hosts that have this local rank */
} hvds_topology_t;

/* Fills every unknown field of t from one allgather over world (a collective: every rank calls
 * it). A local rank the engine gave is kept; a missing one is the rank's index among the ranks
 * of its host, in rank order. On failure returns the allgather's error; t is then unchanged. */
hvds_result_t hvds__launch_topology(struct hvds_p2p* world, const char* host,
                                    hvds_topology_t* t /* IN/OUT */);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_LAUNCH_TOPOLOGY_H_ */
