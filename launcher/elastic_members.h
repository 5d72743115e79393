/* The workers of an elastic job and the memberships published for them. */
#ifndef HVDS_LAUNCHER_ELASTIC_MEMBERS_H_
#define HVDS_LAUNCHER_ELASTIC_MEMBERS_H_

#include "hosts.h"
#include "spawn.h"
#include "store.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  hvds_worker_t w;               /* process, pipes, exit */
  char host[HVDS_HOST_NAME_MAX];
  int slot;                      /* slot index on host: with host, names the worker for ever */
  int rank;                      /* rank in the newest membership; -1 when not in it */
  int removed;                   /* its slot left the discovery script's list: it is not in
                                    the next membership and may exit as it likes */
  int silenced;                  /* ended by the launcher: its peers found it unresponsive */
  int local_rank, local_size, cross_rank, cross_size; /* in the newest membership */
} hvds_member_t;

typedef struct {
  hvds_member_t* m;  /* every worker ever started, in start order; index = output index */
  int n, cap;
  int epoch;         /* newest membership published; 0 before the first */
} hvds_members_t;

/* Appends a worker (not started) for host:slot; NULL when out of memory or at cap. */
hvds_member_t* hvds__members_add(hvds_members_t* ms, const char* host, int slot);
/* The worker on host:slot that has not exited, or NULL. */
hvds_member_t* hvds__members_live_on(hvds_members_t* ms, const char* host, int slot);
/* Workers that have not exited and were not removed: those of the next membership. */
int hvds__members_live(const hvds_members_t* ms);
/* Workers that have not exited, removed ones included. */
int hvds__members_running(const hvds_members_t* ms);
/* Ranks the live (not removed) workers (those of the last membership in their rank order, then new ones in
 * start order), computes local and cross ranks by host, and publishes membership epoch + 1:
 * each worker's line, then the epoch. Prints the membership to stderr with reason. */
hvds_result_t hvds__members_publish(hvds_members_t* ms, hvds_store_server_t* store,
                                    const char* job_id, const char* reason);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_LAUNCHER_ELASTIC_MEMBERS_H_ */
