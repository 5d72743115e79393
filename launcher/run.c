/* `hvdsparse run`: hosts, rendezvous store, spawning, supervision. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "command_line.h"
#include "discovery.h"
#include "elastic.h"
#include "hosts.h"
#include "launcher.h"
#include "log.h"
#include "output.h"
#include "param.h"
#include "run_args.h"
#include "spawn.h"
#include "store.h"
#include "supervise.h"

/* First IPv4 address (else IPv6) of interface name. */
static int iface_addr(const char* name, char* out, size_t outlen) {
  struct ifaddrs* list = NULL;
  if (getifaddrs(&list) != 0) return -1;
  int found = -1;
  for (int want = AF_INET; want != 0 && found != 0; want = want == AF_INET ? AF_INET6 : 0) {
    for (struct ifaddrs* i = list; i != NULL && found != 0; i = i->ifa_next) {
      if (i->ifa_addr == NULL || strcmp(i->ifa_name, name) != 0) continue;
      if (i->ifa_addr->sa_family != want) continue;
      socklen_t len = want == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
      if (getnameinfo(i->ifa_addr, len, out, (socklen_t)outlen, NULL, 0, NI_NUMERICHOST) == 0)
        found = 0;
    }
  }
  freeifaddrs(list);
  return found;
}

/* The local address the kernel would use to reach host (a UDP connect sends nothing). */
static int route_addr(const char* host, char* out, size_t outlen) {
  struct addrinfo hints = {0}, *res = NULL;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  if (getaddrinfo(host, "9", &hints, &res) != 0) return -1;
  int rc = -1;
  int fd = socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
    struct sockaddr_storage sa;
    socklen_t len = sizeof(sa);
    if (getsockname(fd, (struct sockaddr*)&sa, &len) == 0 &&
        getnameinfo((struct sockaddr*)&sa, len, out, (socklen_t)outlen, NULL, 0,
                    NI_NUMERICHOST) == 0)
      rc = 0;
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(res);
  return rc;
}

/* Chooses where the store listens: loopback when every host is local, else --rendezvous-addr,
 * the first address of the first --network-interfaces entry, or the route to the first remote
 * host. */
static hvds_result_t store_address(const hvds_run_args_t* a, const hvds_job_t* job, char* out,
                                   size_t outlen) {
  const char* remote = NULL;
  for (int r = 0; r < job->np && remote == NULL; r++)
    if (!hvds__host_is_local(job->slots[r].hostname)) remote = job->slots[r].hostname;
  if (remote == NULL) {
    snprintf(out, outlen, "127.0.0.1");
    return HVDS_SUCCESS;
  }
  if (a->rendezvous_addr != NULL) {
    snprintf(out, outlen, "%s", a->rendezvous_addr);
    return HVDS_SUCCESS;
  }
  if (a->network_interfaces != NULL) {
    char name[256];
    snprintf(name, sizeof(name), "%.*s", (int)strcspn(a->network_interfaces, ","),
             a->network_interfaces);
    if (iface_addr(name, out, outlen) == 0) return HVDS_SUCCESS;
    fprintf(stderr, "hvdsparse: interface %s has no address\n", name);
    return HVDS_INVALID_ARGUMENT;
  }
  if (route_addr(remote, out, outlen) == 0) return HVDS_SUCCESS;
  fprintf(stderr,
          "hvdsparse: cannot tell which local address host %s reaches; pass --rendezvous-addr "
          "or --network-interfaces\n",
          remote);
  return HVDS_INVALID_ARGUMENT;
}

static hvds_result_t load_hosts(const hvds_run_args_t* a, hvds_host_t** hosts, int* nhosts,
                                char* err, size_t errlen) {
  if (a->discovery_script) {
    hvds_result_t rc =
        hvds__discover_hosts(a->discovery_script, a->slots_per_host, hosts, nhosts, err, errlen);
    if (rc == HVDS_SUCCESS && *nhosts == 0) {
      snprintf(err, errlen, "the host discovery script %s listed no host", a->discovery_script);
      free(*hosts);
      *hosts = NULL;
      rc = HVDS_INVALID_ARGUMENT;
    }
    return rc;
  }
  if (a->hosts) return hvds__hosts_parse(a->hosts, hosts, nhosts, err, errlen);
  if (a->hostfile) return hvds__hosts_parse_file(a->hostfile, hosts, nhosts, err, errlen);
  char spec[64];
  snprintf(spec, sizeof(spec), "localhost:%d", a->np);
  return hvds__hosts_parse(spec, hosts, nhosts, err, errlen);
}

static void print_assignment(const hvds_job_t* job) {
  fprintf(stderr, "hvdsparse: job %s, rendezvous at %s:%d\n", job->job_id, job->store_addr,
          job->store_port);
  for (int r = 0; r < job->np; r++) {
    const hvds_slot_t* s = &job->slots[r];
    fprintf(stderr,
            "hvdsparse: rank %d on %s: local_rank %d/%d, cross_rank %d/%d\n", s->rank,
            s->hostname, s->local_rank, s->local_size, s->cross_rank, s->cross_size);
  }
}

/* Spawns every rank and supervises the job; returns the exit code. */
static int run_job(hvds_job_t* job, hvds_store_server_t* store, double start_timeout) {
  const hvds_run_args_t* a = job->args;
  hvds_output_t* output = NULL;
  hvds_worker_t* workers = calloc((size_t)job->np, sizeof(*workers));
  int code = 1;
  if (workers == NULL || hvds__supervise_install_signals() != HVDS_SUCCESS ||
      hvds__output_create(job->np, a->output_filename, STDOUT_FILENO, STDERR_FILENO, &output) !=
          HVDS_SUCCESS)
    goto done;
  hvds__output_set_timestamps(output, a->prefix_timestamp);
  int spawned = 0;
  for (; spawned < job->np; spawned++) {
    hvds_worker_t* w = &workers[spawned];
    if (hvds__spawn_worker(job, spawned, w) != HVDS_SUCCESS) break;
    hvds__output_add(output, spawned, 0, w->out_fd);
    hvds__output_add(output, spawned, 1, w->err_fd);
  }
  if (spawned < job->np) {
    fprintf(stderr, "hvdsparse: could not start rank %d; stopping the others\n", spawned);
    hvds__supervise_abort(workers, spawned);
    goto done;
  }
  hvds_supervisor_t sv = {workers, job->np, output, store, job, a->verbose, start_timeout};
  code = hvds__supervise(&sv);
done:
  hvds__output_destroy(output);
  free(workers);
  return code;
}

/* An elastic job starts, as Horovod's, with a worker on every slot the hosts have, never more
 * than --max-np (-np and --min-np say how many it needs: --min-np defaults to -np); its workers
 * learn that they are elastic from HVDSPARSE_ELASTIC. */
static hvds_result_t prepare_elastic(hvds_run_args_t* a, const hvds_host_t* hosts, int nhosts,
                                     char* err, size_t errlen) {
  int slots = 0;
  for (int h = 0; h < nhosts; h++) slots += hosts[h].slots;
  if (a->np < a->min_np) a->np = a->min_np;
  if (a->min_np == 0) a->min_np = a->np;
  a->np = a->max_np > 0 && a->max_np < slots ? a->max_np : slots;
  if (a->discovery_script == NULL && slots < a->min_np) {
    snprintf(err, errlen, "the hosts have %d slots, fewer than --min-np %d", slots, a->min_np);
    return HVDS_INVALID_ARGUMENT;
  }
  char timeout[32];
  snprintf(timeout, sizeof timeout, "%g",
           a->elastic_timeout >= 0 ? a->elastic_timeout : HVDS_ELASTIC_TIMEOUT_DEFAULT);
  hvds_result_t rc = hvds__env_list_set(&a->knobs, "ELASTIC", "1");
  if (rc == HVDS_SUCCESS) rc = hvds__env_list_set(&a->knobs, "ELASTIC_TIMEOUT", timeout);
  return rc;
}

/* `hvdsparse run` and horovodrun (horovod_alias 1). */
static int launch(int argc, char** argv, int horovod_alias) {
  char err[512] = "";
  hvds_run_args_t args;
  if (hvds__command_line_parse(argc, argv, &args, err, sizeof(err)) != HVDS_SUCCESS) {
    fprintf(stderr, "hvdsparse: %s\n", err);
    return 2;
  }
  args.horovod_alias |= horovod_alias;
  hvds__run_args_print_warnings(&args, stderr);
  if (args.help || args.version || args.check_build) {
    if (args.help && horovod_alias)
      printf("horovodrun runs `hvdsparse run --horovod-alias`: `import horovod.*` loads "
             "hvdsparse.\n\n");
    if (args.help) hvds__run_args_usage(stdout);
    if (args.version) printf("hvdsparse %s\n", HVDS_VERSION_STRING);
    int code = args.check_build && !args.help && !args.version ? hvds__launcher_check_build() : 0;
    hvds__run_args_free(&args);
    return code;
  }
  hvds_host_t* hosts = NULL;
  int nhosts = 0, code = 2;
  hvds_store_server_t* store = NULL;
  hvds_job_t job;
  memset(&job, 0, sizeof(job));
  job.args = &args;
  hvds_slot_t* slots = NULL;
  if (load_hosts(&args, &hosts, &nhosts, err, sizeof(err)) != HVDS_SUCCESS) goto fail;
  if (args.elastic && prepare_elastic(&args, hosts, nhosts, err, sizeof(err)) != HVDS_SUCCESS)
    goto fail;
  if (args.np == 0)
    for (int h = 0; h < nhosts; h++) args.np += hosts[h].slots;
  if (hvds__hosts_assign(hosts, nhosts, args.np, &slots, err, sizeof(err)) != HVDS_SUCCESS)
    goto fail;
  job.slots = slots;
  job.np = args.np;
  err[0] = '\0';
  if (hvds__job_make_ids(&job) != HVDS_SUCCESS) goto fail;
  if (getcwd(job.cwd, sizeof(job.cwd)) == NULL) snprintf(job.cwd, sizeof(job.cwd), ".");
  if (store_address(&args, &job, job.store_addr, sizeof(job.store_addr)) != HVDS_SUCCESS)
    goto fail;
  if (hvds__store_server_start(job.store_addr, 0, job.secret, &store, &job.store_port) !=
      HVDS_SUCCESS) {
    snprintf(err, sizeof(err), "cannot start the rendezvous store on %s", job.store_addr);
    goto fail;
  }
  double start_timeout =
      args.start_timeout >= 0 ? args.start_timeout : hvds__param_dbl(HVDS_PARAM_START_TIMEOUT);
  if (args.verbose) print_assignment(&job);
  code = args.elastic ? hvds__elastic_run(&job, store) : run_job(&job, store, start_timeout);
fail:
  if (err[0]) fprintf(stderr, "hvdsparse: %s\n", err);
  hvds__store_server_stop(store);
  free(slots);
  free(hosts);
  hvds__run_args_free(&args);
  return code;
}

int hvds__launcher_run(int argc, char** argv) { return launch(argc, argv, 0); }

int hvds__launcher_horovodrun(int argc, char** argv) {
  if (argc == 0) {
    fprintf(stderr, "usage: horovodrun -np N [flags] command ... (horovodrun --help)\n");
    return 2;
  }
  return launch(argc, argv, 1);
}
