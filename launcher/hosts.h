/* Host lists (-H, --hostfile) and horovodrun's host assignment. */
#ifndef HVDS_LAUNCHER_HOSTS_H_
#define HVDS_LAUNCHER_HOSTS_H_

#include <stddef.h>

#include "hvdsparse.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HVDS_HOST_NAME_MAX 256

typedef struct {
  char name[HVDS_HOST_NAME_MAX];
  int slots;
} hvds_host_t;

/* Where one rank runs. hostname points into the host array given to hvds__hosts_assign. */
typedef struct {
  const char* hostname;
  int rank, size;
  int local_rank, local_size; /* local_size: ranks placed on this host */
  int cross_rank, cross_size; /* among hosts that have a rank with this local_rank */
} hvds_slot_t;

/* Parses "h1:2,h2:4" ("h" alone means one slot). On success *hosts is malloc'd (caller frees)
 * and *nhosts > 0; on error nothing is allocated and err says why. */
hvds_result_t hvds__hosts_parse(const char* spec, hvds_host_t** hosts /* OUT */,
                                int* nhosts /* OUT */, char* err, size_t errlen);
/* Parses a hostfile: one "host slots=N" per line ("host" alone means one slot), '#' comments and
 * blank lines ignored. Same ownership as hvds__hosts_parse. */
hvds_result_t hvds__hosts_parse_file(const char* path, hvds_host_t** hosts /* OUT */,
                                     int* nhosts /* OUT */, char* err, size_t errlen);
/* Fills each host's slots in order until np ranks are placed, as horovodrun does. *slots is a
 * malloc'd array of np entries (caller frees). HVDS_INVALID_ARGUMENT when the hosts have fewer
 * than np slots. */
hvds_result_t hvds__hosts_assign(const hvds_host_t* hosts, int nhosts, int np,
                                 hvds_slot_t** slots /* OUT */, char* err, size_t errlen);
/* 1 for localhost, 127.0.0.1, ::1 and this machine's host name. */
int hvds__host_is_local(const char* name);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_LAUNCHER_HOSTS_H_ */
