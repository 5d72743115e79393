/* Elastic jobs (`--min-np`, `--host-discovery-script`): a worker that fails does not end the job.
 *
 * The driver keeps the job's membership: which workers run and the rank of each. When a worker
 * fails, or the discovery script lists a slot that has no worker (up to --max-np), it publishes a
 * new membership in the store (runtime/elastic_join.c reads it): the survivors keep their order,
 * new workers come after them. The job ends with an error when fewer than --min-np workers are
 * left for --elastic-timeout seconds, or after --reset-limit changes. */
#ifndef HVDS_LAUNCHER_ELASTIC_H_
#define HVDS_LAUNCHER_ELASTIC_H_

#include "spawn.h"
#include "store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Elastic timeout when --elastic-timeout is absent (horovodrun's). */
#define HVDS_ELASTIC_TIMEOUT_DEFAULT 600.0

/* Runs the job: job->slots (job->np) are the first workers. Returns the exit code: 0 when the
 * workers of the last membership all exited 0; 1 when the job ended below --min-np, at the reset
 * limit, or when every worker failed; 128+signal when the launcher was told to stop. Every worker
 * is reaped on return. */
int hvds__elastic_run(hvds_job_t* job, hvds_store_server_t* store);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_LAUNCHER_ELASTIC_H_ */
