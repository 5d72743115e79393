/* Reading the engine's variables into an hvds_launch_env_t. Besides param.c (our own knobs), this
 * is the one runtime file that reads the environment: the variables other engines set. */
#define _GNU_SOURCE
#include "launch_env.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "param.h"
#include "slurm_nodelist.h"

typedef struct {
  hvds_launch_getenv_fn get;
  void* ctx;
} vars_t;

/* The value of name, or NULL when unset or empty (as param.c treats our own knobs). */
static const char* var(const vars_t* v, const char* name) {
  const char* s = v->get(v->ctx, name);
  return s != NULL && s[0] != '\0' ? s : NULL;
}

/* The first of two names that is set. */
static const char* var2(const vars_t* v, const char* a, const char* b) {
  const char* s = var(v, a);
  return s != NULL ? s : var(v, b);
}

/* A non-negative integer, or HVDS_LAUNCH_UNKNOWN when unset or not one. */
static int int_of(const char* s) {
  if (s == NULL) return HVDS_LAUNCH_UNKNOWN;
  char* end;
  long x = strtol(s, &end, 10);
  return (*end != '\0' || x < 0 || x > INT_MAX) ? HVDS_LAUNCH_UNKNOWN : (int)x;
}

int hvds__launch_port_for(const char* key) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (const char* c = key; c && *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
  return 20000 + (int)(h % 12000u);
}

/* Records where the store is; rank 0 listens on loopback only when the address is loopback. */
static void set_store(hvds_launch_env_t* out, const char* addr, int port) {
  snprintf(out->store_addr, sizeof(out->store_addr), "%s", addr);
  out->store_port = port;
  out->problem[0] = '\0';
  if (strcmp(addr, "localhost") == 0)
    snprintf(out->bind_addr, sizeof(out->bind_addr), "127.0.0.1");
  else if (strncmp(addr, "127.", 4) == 0 || strcmp(addr, "::1") == 0)
    snprintf(out->bind_addr, sizeof(out->bind_addr), "%s", addr);
  else
    out->bind_addr[0] = '\0';
}

static int parse_torchrun(const vars_t* v, hvds_launch_env_t* out) {
  if (var(v, "RANK") == NULL || var(v, "WORLD_SIZE") == NULL) return 0;
  out->engine = HVDS_ENGINE_TORCHRUN;
  out->rank = int_of(var(v, "RANK"));
  out->size = int_of(var(v, "WORLD_SIZE"));
  out->local_rank = int_of(var(v, "LOCAL_RANK"));
  out->local_size = int_of(var(v, "LOCAL_WORLD_SIZE"));
  const char* run_id = var(v, "TORCHELASTIC_RUN_ID");
  snprintf(out->job_id, sizeof(out->job_id), "torch-%s", run_id ? run_id : "job");
  const char* addr = var(v, "MASTER_ADDR");
  int port = int_of(var(v, "MASTER_PORT"));
  if (addr == NULL || port <= 0) {
    snprintf(out->problem, sizeof(out->problem),
             "RANK and WORLD_SIZE are set but MASTER_ADDR or MASTER_PORT is not");
    return 1;
  }
  // torchrun's agent already serves its own store on MASTER_PORT; ours takes the next port.
  const char* agent = var(v, "TORCHELASTIC_USE_AGENT_STORE");
  if (agent && (strcasecmp(agent, "true") == 0 || strcmp(agent, "1") == 0)) port++;
  set_store(out, addr, port);
  return 1;
}

static int parse_mpirun(const vars_t* v, hvds_launch_env_t* out) {
  if (var(v, "OMPI_COMM_WORLD_RANK") == NULL || var(v, "OMPI_COMM_WORLD_SIZE") == NULL) return 0;
  out->engine = HVDS_ENGINE_MPIRUN;
  out->rank = int_of(var(v, "OMPI_COMM_WORLD_RANK"));
  out->size = int_of(var(v, "OMPI_COMM_WORLD_SIZE"));
  out->local_rank = int_of(var(v, "OMPI_COMM_WORLD_LOCAL_RANK"));
  out->local_size = int_of(var(v, "OMPI_COMM_WORLD_LOCAL_SIZE"));
  // Open MPI 4 names the job in OMPI_MCA_ess_base_jobid, Open MPI 5 (PMIx) in PMIX_NAMESPACE.
  const char* job = var2(v, "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE");
  if (job == NULL) {
    snprintf(out->job_id, sizeof(out->job_id), "ompi-job");
    snprintf(
        out->problem, sizeof(out->problem),
        "mpirun set no job id (OMPI_MCA_ess_base_jobid, PMIX_NAMESPACE) to derive a port from");
    return 1;
  }
  snprintf(out->job_id, sizeof(out->job_id), "ompi-%s", job);
  out->store_port = hvds__launch_port_for(out->job_id);
  if (out->local_size == out->size) {
    set_store(out, "127.0.0.1", out->store_port);  // every rank on this host
  } else {
    snprintf(out->problem, sizeof(out->problem),
             "mpirun across hosts does not say which host runs rank 0; pass "
             "-x HVDSPARSE_GLOO_RENDEZVOUS_ADDR=<that host>");
  }
  return 1;
}

static int parse_srun(const vars_t* v, hvds_launch_env_t* out) {
  // SLURM_STEP_ID tells an srun task from the batch script, which also has SLURM_PROCID=0.
  if (var(v, "SLURM_PROCID") == NULL || var2(v, "SLURM_STEP_ID", "SLURM_STEPID") == NULL) return 0;
  out->engine = HVDS_ENGINE_SRUN;
  out->rank = int_of(var(v, "SLURM_PROCID"));
  out->size = int_of(var2(v, "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"));
  out->local_rank = int_of(var(v, "SLURM_LOCALID"));
  const char* node = var(v, "SLURMD_NODENAME");
  if (node) snprintf(out->host, sizeof(out->host), "%s", node);
  const char* job = var2(v, "SLURM_JOB_ID", "SLURM_JOBID");
  snprintf(out->job_id, sizeof(out->job_id), "slurm-%s.%s", job ? job : "job",
           var2(v, "SLURM_STEP_ID", "SLURM_STEPID"));
  // Task 0 runs on the step's first node under the block and cyclic distributions.
  const char* list = var(v, "SLURM_STEP_NODELIST");
  if (list == NULL) list = var2(v, "SLURM_JOB_NODELIST", "SLURM_NODELIST");
  char first[256];
  if (hvds__slurm_nodelist_host(list, 0, first, sizeof(first)) == 0) {
    set_store(out, first, hvds__launch_port_for(out->job_id));
  } else {
    out->store_port = hvds__launch_port_for(out->job_id);
    snprintf(out->problem, sizeof(out->problem),
             "cannot read rank 0's host from node list '%.120s'", list ? list : "(unset)");
  }
  return 1;
}

void hvds__launch_env_parse(hvds_launch_getenv_fn get, void* ctx, hvds_launch_env_t* out) {
  memset(out, 0, sizeof(*out));
  out->local_rank = out->local_size = HVDS_LAUNCH_UNKNOWN;
  vars_t v = {get, ctx};
  if (var2(&v, "HVDSPARSE_RANK", "HOROVOD_RANK") || var2(&v, "HVDSPARSE_SIZE", "HOROVOD_SIZE")) {
    out->engine = HVDS_ENGINE_HVDSPARSE;
    return;
  }
  if (parse_torchrun(&v, out) || parse_mpirun(&v, out) || parse_srun(&v, out)) return;
  out->engine = HVDS_ENGINE_NONE;
}

static const char* process_getenv(void* ctx, const char* name) { return getenv(name); }

void hvds__launch_env_read(hvds_launch_env_t* out) {
  hvds__launch_env_parse(process_getenv, NULL, out);
  if (out->engine == HVDS_ENGINE_NONE || out->engine == HVDS_ENGINE_HVDSPARSE) return;
  if (hvds__param_is_set(HVDS_PARAM_RENDEZVOUS_ADDR))
    set_store(out, hvds__param_str(HVDS_PARAM_RENDEZVOUS_ADDR), out->store_port);
  if (hvds__param_is_set(HVDS_PARAM_RENDEZVOUS_PORT))
    out->store_port = (int)hvds__param_int(HVDS_PARAM_RENDEZVOUS_PORT);
  if (hvds__param_is_set(HVDS_PARAM_JOB_ID))
    snprintf(out->job_id, sizeof(out->job_id), "%s", hvds__param_str(HVDS_PARAM_JOB_ID));
  if (hvds__param_is_set(HVDS_PARAM_HOSTNAME))
    snprintf(out->host, sizeof(out->host), "%s", hvds__param_str(HVDS_PARAM_HOSTNAME));
  if (out->host[0] == '\0' && gethostname(out->host, sizeof(out->host) - 1) != 0)
    snprintf(out->host, sizeof(out->host), "localhost");
}

const char* hvds__launch_engine_name(hvds_engine_t engine) {
  switch (engine) {
    case HVDS_ENGINE_HVDSPARSE:
      return "hvdsparse run";
    case HVDS_ENGINE_TORCHRUN:
      return "torchrun-style";
    case HVDS_ENGINE_MPIRUN:
      return "mpirun";
    case HVDS_ENGINE_SRUN:
      return "srun";
    case HVDS_ENGINE_NONE:
      break;
  }
  return "none";
}
