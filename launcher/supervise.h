/* Supervising a running job: output forwarding, exits, failure propagation, signals. */
#ifndef HVDS_LAUNCHER_SUPERVISE_H_
#define HVDS_LAUNCHER_SUPERVISE_H_

#include "output.h"
#include "spawn.h"
#include "store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Seconds between SIGTERM and SIGKILL when the job is torn down (horovodrun's grace time). */
#define HVDS_GRACE_SECONDS 5
/* After a worker fails, how long the others may take to fail on their own (and report why)
 * before they are sent SIGTERM. */
#define HVDS_SETTLE_MS 2000

typedef struct {
  hvds_worker_t* workers;     /* np entries, all spawned */
  int np;
  hvds_output_t* output;      /* the workers' pipes are registered here */
  hvds_store_server_t* store; /* records hvds/<job>/failed, says who arrived; may be NULL */
  const hvds_job_t* job;
  int verbose;                /* report rendezvous progress every second */
  double start_timeout;       /* seconds every rank has to arrive once the first has */
} hvds_supervisor_t;

/* Names the first process that failed on stderr, in mpirun's and Horovod's words ("... detected
 * that one or more processes exited with non-zero status ..."), with "Horovod" for the subject
 * under its alias (horovodrun, --horovod-alias) so that what scans a job's log for Horovod's
 * sentence finds it. */
void hvds__report_first_failure(const hvds_run_args_t* args, int rank, int exit_code);

/* Routes SIGCHLD, SIGINT, SIGTERM and SIGHUP to the supervisor and ignores SIGPIPE. Call once,
 * before the first worker is spawned, so that no exit goes unnoticed. */
hvds_result_t hvds__supervise_install_signals(void);

/* The read end of the self-pipe that carries each signal number caught (non-blocking), for a
 * supervisor loop of its own (elastic.c); -1 before hvds__supervise_install_signals(). */
int hvds__supervise_signal_fd(void);

/* Runs until every worker has exited and returns the launcher's exit code: 0 when all exited
 * with 0; 1 after a worker failed (the first failure is named on stderr, and so are the ranks
 * that never reached rendezvous while others did); 128+signal when the launcher itself was told
 * to stop. Every worker's process group is gone and every worker
 * reaped on return. */
int hvds__supervise(hvds_supervisor_t* sv);

/* Sends sig to the process group of every worker not yet reaped, e.g. when spawning failed
 * halfway, then waits for and reaps them (after SIGKILL once the grace time has passed). */
void hvds__supervise_abort(hvds_worker_t* workers, int n);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_LAUNCHER_SUPERVISE_H_ */
