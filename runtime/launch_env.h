/* Which engine started this worker, and what its environment says: identity, this host, and
 * where rank 0 serves the rendezvous store. Engines, first match wins:
 *   1. the hvdsparse launcher (or horovodrun): HVDSPARSE_RANK / HOROVOD_RANK are set;
 *   2. torchrun-style: RANK, WORLD_SIZE (LOCAL_RANK, LOCAL_WORLD_SIZE), MASTER_ADDR, MASTER_PORT;
 *   3. Open MPI's mpirun: OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE;
 *   4. a PMI mpiexec (MPICH's and Intel MPI's Hydra, Cray PALS, Flux): PMI_RANK, PMI_SIZE,
 *      MPI_LOCALRANKID, MPI_LOCALNRANKS (unless srun's variables say the same thing);
 *   5. Slurm's srun: SLURM_PROCID, SLURM_NTASKS, SLURM_STEP_ID, SLURM_LOCALID, SLURM_NODELIST;
 *   6. a PMIx launcher: PMIX_RANK, PMIX_NAMESPACE (no size: an error that says so).
 * A launcher's variables that say it started several processes without saying which one this
 * is (PMI_SIZE without PMI_RANK, WORLD_SIZE without RANK, ...) are an error too, never size 1.
 * docs/launching.md describes each and the store's address, port and secret. */
#ifndef HVDS_LAUNCH_ENV_H_
#define HVDS_LAUNCH_ENV_H_

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  HVDS_ENGINE_NONE = 0,  /* nothing recognised: one process on its own */
  HVDS_ENGINE_HVDSPARSE, /* `hvdsparse run`: the identity comes from the HVDSPARSE_* knobs */
  HVDS_ENGINE_TORCHRUN,  /* torchrun, Kubernetes operators, any RANK/WORLD_SIZE launcher */
  HVDS_ENGINE_MPIRUN,    /* Open MPI */
  HVDS_ENGINE_SRUN,      /* Slurm */
  HVDS_ENGINE_PMI,       /* MPICH, Intel MPI, Cray PALS, Flux: PMI_RANK and PMI_SIZE */
  HVDS_ENGINE_PMIX,      /* a PMIx launcher: PMIX_RANK; it puts no size in the environment */
  HVDS_ENGINE_UNRESOLVED /* a launcher started several processes but says not which this is */
} hvds_engine_t;

/* A value the engine does not give; the runtime computes it from every rank's host name. */
#define HVDS_LAUNCH_UNKNOWN (-1)

typedef struct {
  hvds_engine_t engine;
  int rank, size;             /* valid for engines other than NONE and HVDSPARSE */
  int local_rank, local_size; /* HVDS_LAUNCH_UNKNOWN when the engine does not say */
  char host[256];             /* this host's name, for grouping ranks by host */
  char store_addr[256];       /* where every rank reaches rank 0's store; "" when unknown */
  char bind_addr[64];         /* where rank 0 listens: "127.0.0.1", or "" for every interface */
  int store_port;             /* 0 when unknown */
  char job_id[128];           /* prefix of this job's keys in the store */
  char problem[256];          /* why store_addr is unknown or, for PMIX and UNRESOLVED, why the
                                 rank or size is: for the error message */
} hvds_launch_env_t;

/* Returns the variable's value, or NULL when unset. */
typedef const char* (*hvds_launch_getenv_fn)(void* ctx, const char* name);

/* Fills out from the variables get returns (empty values count as unset). Pure: reads nothing
 * else, so tests pass their own variables. host is set only when the engine names it. */
void hvds__launch_env_parse(hvds_launch_getenv_fn get, void* ctx, hvds_launch_env_t* out /* OUT */);

/* The same over this process's environment, then the knobs that override an engine's choice:
 * HVDSPARSE_GLOO_RENDEZVOUS_ADDR / _PORT (where rank 0 serves), HVDSPARSE_HOSTNAME and
 * HVDSPARSE_JOB_ID. host falls back to gethostname(). A PMI job without a job id in the
 * environment (Hydra sets none) is named by the pid of the ranks' parent hydra_pmi_proxy. */
void hvds__launch_env_read(hvds_launch_env_t* out /* OUT */);

/* A port in [20000, 32000) that every rank derives alike from key (the job's id): below
 * Linux's ephemeral range, so it rarely collides with a connection's local port. */
int hvds__launch_port_for(const char* key);

/* "hvdsparse run", "torchrun-style", "mpirun", "srun", "mpiexec (PMI)", "a PMIx launcher",
 * "an unknown launcher" or "none". */
const char* hvds__launch_engine_name(hvds_engine_t engine);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_LAUNCH_ENV_H_ */
