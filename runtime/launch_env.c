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

/* Names the job and derives the port from it. One host (every rank local): rank 0 serves on
 * loopback. Across hosts the engine does not say where rank 0 runs: hint says how to pass
 * HVDSPARSE_GLOO_RENDEZVOUS_ADDR with this engine. Without a job id on one host the address is
 * known but the port is not. */
static void set_job(hvds_launch_env_t* out, const char* prefix, const char* job, const char* hint) {
  snprintf(out->job_id, sizeof(out->job_id), "%s-%s", prefix, job ? job : "job");
  out->store_port = job ? hvds__launch_port_for(out->job_id) : 0;
  int one_host = out->local_size != HVDS_LAUNCH_UNKNOWN && out->local_size == out->size;
  if (one_host) set_store(out, "127.0.0.1", out->store_port);
  if (!one_host)
    snprintf(out->problem, sizeof(out->problem),
             "%s does not say which host runs rank 0; pass %s", hvds__launch_engine_name(out->engine),
             hint);
  else if (job == NULL)
    snprintf(out->problem, sizeof(out->problem),
             "%s set no job id to derive a port from; set HVDSPARSE_GLOO_RENDEZVOUS_PORT to a free "
             "port on every rank",
             hvds__launch_engine_name(out->engine));
}

static int parse_mpirun(const vars_t* v, hvds_launch_env_t* out) {
  if (var(v, "OMPI_COMM_WORLD_RANK") == NULL || var(v, "OMPI_COMM_WORLD_SIZE") == NULL) return 0;
  out->engine = HVDS_ENGINE_MPIRUN;
  out->rank = int_of(var(v, "OMPI_COMM_WORLD_RANK"));
  out->size = int_of(var(v, "OMPI_COMM_WORLD_SIZE"));
  out->local_rank = int_of(var(v, "OMPI_COMM_WORLD_LOCAL_RANK"));
  out->local_size = int_of(var(v, "OMPI_COMM_WORLD_LOCAL_SIZE"));
  // Open MPI 4 names the job in OMPI_MCA_ess_base_jobid, Open MPI 5 (PMIx) in PMIX_NAMESPACE.
  set_job(out, "ompi", var2(v, "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"),
          "-x HVDSPARSE_GLOO_RENDEZVOUS_ADDR=<that host>");
  return 1;
}

/* srun's own identity, when its variables are there and agree with rank and size: srun with a
 * PMI plugin sets both kinds, and srun knows where rank 0 runs. */
static int srun_agrees(const vars_t* v, int rank, int size) {
  if (var2(v, "SLURM_STEP_ID", "SLURM_STEPID") == NULL) return 0;
  return int_of(var(v, "SLURM_PROCID")) == rank &&
         int_of(var2(v, "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS")) == size;
}

/* The first of several names that is set. */
static const char* var_any(const vars_t* v, const char* const* names) {
  for (; *names != NULL; names++)
    if (var(v, *names) != NULL) return var(v, *names);
  return NULL;
}

/* mpiexec speaking PMI: MPICH's and Intel MPI's Hydra (MPI_LOCALRANKID, MPI_LOCALNRANKS), Cray
 * PALS (PMI_LOCAL_RANK, PMI_LOCAL_SIZE, PALS_APID), Flux (FLUX_JOB_ID); Slurm's PMI2 (PMI_JOBID)
 * is left to parse_srun. Hydra sets no job id: hvds__launch_env_read finds one. */
static int parse_pmi(const vars_t* v, hvds_launch_env_t* out) {
  static const char* const local_rank[] = {"MPI_LOCALRANKID", "PMI_LOCAL_RANK", NULL};
  static const char* const local_size[] = {"MPI_LOCALNRANKS", "PMI_LOCAL_SIZE", NULL};
  static const char* const job[] = {"PMI_JOBID", "PALS_APID", "FLUX_JOB_ID", "PMIX_NAMESPACE", NULL};
  if (var(v, "PMI_RANK") == NULL || var(v, "PMI_SIZE") == NULL) return 0;
  int rank = int_of(var(v, "PMI_RANK")), size = int_of(var(v, "PMI_SIZE"));
  if (srun_agrees(v, rank, size)) return 0;
  out->engine = HVDS_ENGINE_PMI;
  out->rank = rank;
  out->size = size;
  out->local_rank = int_of(var_any(v, local_rank));
  out->local_size = int_of(var_any(v, local_size));
  set_job(out, "pmi", var_any(v, job), "-genv HVDSPARSE_GLOO_RENDEZVOUS_ADDR <that host>");
  return 1;
}

/* PMIx keeps the job's size in its server, not in the environment. */
static int parse_pmix(const vars_t* v, hvds_launch_env_t* out) {
  if (var(v, "PMIX_RANK") == NULL) return 0;
  out->engine = HVDS_ENGINE_PMIX;
  out->rank = int_of(var(v, "PMIX_RANK"));
  out->size = HVDS_LAUNCH_UNKNOWN;
  snprintf(out->problem, sizeof(out->problem),
           "PMIX_RANK=%.16s is set but no variable gives the job's size (PMIx keeps it in its "
           "server); start the job with Open MPI's mpirun, srun, mpiexec or torchrun instead",
           var(v, "PMIX_RANK"));
  return 1;
}

/* A launcher's variables saying it started several processes without saying which this is. */
static int parse_unresolved(const vars_t* v, hvds_launch_env_t* out) {
  static const struct {
    const char *size, *rank, *who;
  } kinds[] = {{"PMI_SIZE", "PMI_RANK", "a PMI mpiexec"},
               {"MPI_LOCALNRANKS", "PMI_RANK", "MPICH's or Intel MPI's mpiexec"},
               {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "Open MPI's mpirun"},
               {"WORLD_SIZE", "RANK", "a torchrun-style launcher"}};
  for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
    int n = int_of(var(v, kinds[k].size));
    if (n <= 1 || var(v, kinds[k].rank) != NULL) continue;
    out->engine = HVDS_ENGINE_UNRESOLVED;
    snprintf(out->problem, sizeof(out->problem),
             "%s=%d says %s started %d processes, but %s, which names this one, is not set",
             kinds[k].size, n, kinds[k].who, n, kinds[k].rank);
    return 1;
  }
  if (var(v, "PMI_FD") != NULL || var(v, "PMI_PORT") != NULL) {
    out->engine = HVDS_ENGINE_UNRESOLVED;
    snprintf(out->problem, sizeof(out->problem),
             "%s is set (an mpiexec speaking PMI started this process) but PMI_RANK and PMI_SIZE "
             "are not", var(v, "PMI_FD") ? "PMI_FD" : "PMI_PORT");
    return 1;
  }
  return 0;
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
  if (parse_torchrun(&v, out) || parse_mpirun(&v, out) || parse_pmi(&v, out) ||
      parse_srun(&v, out) || parse_pmix(&v, out) || parse_unresolved(&v, out))
    return;
  out->engine = HVDS_ENGINE_NONE;
}

static const char* process_getenv(void* ctx, const char* name) { return getenv(name); }

/* The pid of the nearest ancestor named hydra_pmi_proxy (MPICH's and Intel MPI's per-host
 * proxy, parent of every rank it starts, wrappers such as `sh -c` in between), or 0. */
static long hydra_proxy_pid(void) {
  long pid = (long)getppid();
  for (int depth = 0; depth < 16 && pid > 1; depth++) {
    char path[64], stat[512] = "";
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    FILE* f = fopen(path, "r");
    if (f == NULL) return 0;
    size_t n = fread(stat, 1, sizeof(stat) - 1, f);
    fclose(f);
    stat[n] = '\0';
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses; the last ')' ends it.
    char* open = strchr(stat, '(');
    char* close = strrchr(stat, ')');
    if (open == NULL || close == NULL || close < open) return 0;
    if (close - open - 1 == 15 && strncmp(open + 1, "hydra_pmi_proxy", 15) == 0) return pid;
    char state;
    if (sscanf(close + 1, " %c %ld", &state, &pid) != 2) return 0;
  }
  return 0;
}

void hvds__launch_env_read(hvds_launch_env_t* out) {
  hvds__launch_env_parse(process_getenv, NULL, out);
  if (out->engine == HVDS_ENGINE_NONE || out->engine == HVDS_ENGINE_HVDSPARSE ||
      out->engine == HVDS_ENGINE_PMIX || out->engine == HVDS_ENGINE_UNRESOLVED)
    return;
  // Hydra names no job; on one host its proxy, the parent of every rank, does.
  if (out->engine == HVDS_ENGINE_PMI && out->store_port == 0 && out->store_addr[0] != '\0') {
    char job[32];
    long proxy = hydra_proxy_pid();
    snprintf(job, sizeof(job), "hydra%ld", proxy);
    if (proxy > 0) set_job(out, "pmi", job, "");
  }
  if (hvds__param_is_set(HVDS_PARAM_RENDEZVOUS_ADDR))
    set_store(out, hvds__param_str(HVDS_PARAM_RENDEZVOUS_ADDR), out->store_port);
  if (hvds__param_is_set(HVDS_PARAM_RENDEZVOUS_PORT))
    out->store_port = (int)hvds__param_int(HVDS_PARAM_RENDEZVOUS_PORT);
  if (out->store_addr[0] != '\0' && out->store_port > 0) out->problem[0] = '\0';
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
    case HVDS_ENGINE_PMI:
      return "mpiexec (PMI)";
    case HVDS_ENGINE_PMIX:
      return "a PMIx launcher";
    case HVDS_ENGINE_UNRESOLVED:
      return "an unknown launcher";
    case HVDS_ENGINE_NONE:
      break;
  }
  return "none";
}
