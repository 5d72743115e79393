/* Starting workers: per-rank environment, local exec or remote agent (ssh or --rsh), each
 * worker in its own session and process group with its stdout and stderr on pipes. */
#ifndef HVDS_LAUNCHER_SPAWN_H_
#define HVDS_LAUNCHER_SPAWN_H_

#include <sys/types.h>

#include "hosts.h"
#include "run_args.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Everything the workers of one job share. */
typedef struct {
  const hvds_run_args_t* args;
  const hvds_slot_t* slots; /* np entries */
  int np;
  char secret[65];          /* 32 random bytes as hex */
  char job_id[33];
  char store_addr[256];     /* address workers connect to */
  int store_port;
  char cwd[4096];           /* remote workers cd here first */
} hvds_job_t;

typedef struct {
  int rank;
  pid_t pid;     /* also the id of the worker's process group */
  int out_fd;    /* read ends of the worker's stdout and stderr pipes; -1 once closed */
  int err_fd;
  int exited;    /* 1 once the exit was observed (the zombie is reaped at the very end) */
  int status;    /* exit code, or the signal number when signaled */
  int signaled;
} hvds_worker_t;

/* Fills job->secret (from /dev/urandom) and job->job_id. */
hvds_result_t hvds__job_make_ids(hvds_job_t* job);

/* The variables set for one rank: identity, rendezvous, secret, job id (each under HVDSPARSE_
 * and HOROVOD_), PYTHONUNBUFFERED=1, every knob under both prefixes, the -x variables, and with
 * --keep-freed-memory the malloc settings of malloc_env.h.
 * The caller frees env with hvds__env_list_free(). */
hvds_result_t hvds__worker_env(const hvds_job_t* job, int rank, hvds_env_list_t* env /* OUT */);

/* The argv that starts rank: the command itself for a local host, else the remote agent's
 * command line carrying env. NULL-terminated; free with hvds__argv_free(). */
hvds_result_t hvds__worker_argv(const hvds_job_t* job, int rank, const hvds_env_list_t* env,
                                char*** argv /* OUT */);
void hvds__argv_free(char** argv);

/* Forks and execs rank in a new session. On success w is filled and owns two pipe fds. */
hvds_result_t hvds__spawn_worker(const hvds_job_t* job, int rank, hvds_worker_t* w /* OUT */);

/* Adds the Python side of a worker's environment to env: from a build tree the framework packages
 * on PYTHONPATH and HVDSPARSE_LIBRARY; with a->horovod_alias the alias directory first. */
hvds_result_t hvds__python_env(const hvds_run_args_t* a, hvds_env_list_t* env);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_LAUNCHER_SPAWN_H_ */
