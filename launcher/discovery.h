/* Elastic jobs: the host discovery script and the hosts it lists. */
#ifndef HVDS_LAUNCHER_DISCOVERY_H_
#define HVDS_LAUNCHER_DISCOVERY_H_

#include "hosts.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How long the script may run; a script that hangs must not hold up the launcher's loop. */
#define HVDS_DISCOVERY_TIMEOUT_MS 10000

/* Runs script (through /bin/sh, in its own process group, killed after
 * HVDS_DISCOVERY_TIMEOUT_MS with HVDS_TIMEOUT) and parses what it prints: one host a line, "host:slots" or
 * "host" (then slots_per_host slots, 1 when 0). Blank lines are skipped; a host listed twice
 * keeps its last count. On success *hosts is malloc'd (caller frees; NULL when the script listed
 * none) and *nhosts >= 0. On error (the script failed, or a line is not a host) nothing is
 * allocated and err says why. */
hvds_result_t hvds__discover_hosts(const char* script, int slots_per_host,
                                   hvds_host_t** hosts /* OUT */, int* nhosts /* OUT */,
                                   char* err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_LAUNCHER_DISCOVERY_H_ */
