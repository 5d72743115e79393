/* The elastic driver: one thread, poll() over the signal self-pipe and the workers' pipes, as
 * supervise.c, plus the membership (elastic_members.h) and the discovery script (discovery.h).
 *
 * Exits are observed with waitid(WNOWAIT) and zombies reaped only at the end, as in supervise.c,
 * so that kill(-pgid) never reaches a reused process group. */
#define _GNU_SOURCE
#include "elastic.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "discovery.h"
#include "elastic_members.h"
#include "output.h"
#include "store_keys.h"
#include "supervise.h"

#define DISCOVERY_INTERVAL_MS 1000
#define TICK_MS 250
#define DRAIN_MS 2000

/* A host (Horovod's blacklist), or with --blacklist-scope slot a slot, whose worker failed: not
 * used again until its cool-down ends (never without --blacklist-cooldown-range). */
typedef struct {
  char host[HVDS_HOST_NAME_MAX];
  int slot; /* -1: the whole host */
  int failures;
  int64_t until_ms; /* -1: for the rest of the job; 0: its cool-down is over */
} banned_t;

typedef struct {
  hvds_job_t* job;
  hvds_store_server_t* store;
  hvds_output_t* output;
  hvds_members_t ms;
  banned_t* banned; /* hosts (or slots) whose worker failed */
  int nbanned;
  int min_np, max_np;
  double timeout_s;      /* --elastic-timeout */
  int resets;            /* memberships published after the first */
  int64_t below_since;   /* when the job fell below --min-np; -1 when it is not */
  int64_t next_discovery;
  char pending[256];     /* why a new membership is due; "" when none is */
  int stop_signal;
  int finishing;         /* 1: a worker of the membership finished (exit 0): the job is ending,
                            no worker is started or removed any more */
  int ended;             /* 1: the job is being torn down (error or signal) */
  int failed;            /* 1: the job ends in error */
} driver_t;

static void kill_group(const hvds_worker_t* w, int sig) {
  if (w->pid > 0 && kill(-w->pid, sig) != 0 && errno == ESRCH) kill(w->pid, sig);
}

/* Tears the job down: SIGTERM now, SIGKILL after the grace time (in the main loop). */
static int64_t terminate_all(driver_t* d, int sig) {
  for (int i = 0; i < d->ms.n; i++)
    if (!d->ms.m[i].w.exited) {
      kill_group(&d->ms.m[i].w, sig);
      kill_group(&d->ms.m[i].w, SIGCONT);
    }
  d->ended = 1;
  return hvds__now_ms() + HVDS_GRACE_SECONDS * 1000;
}

static banned_t* find_banned(driver_t* d, const char* host, int slot) {
  for (int i = 0; i < d->nbanned; i++)
    if (d->banned[i].slot == slot && strcmp(d->banned[i].host, host) == 0) return &d->banned[i];
  return NULL;
}

/* "host" or "host:slot", as the ban names it. */
static const char* banned_name(const banned_t* b, char* buf, size_t len) {
  if (b->slot < 0)
    snprintf(buf, len, "%s", b->host);
  else
    snprintf(buf, len, "%s:%d", b->host, b->slot);
  return buf;
}

static int is_banned(driver_t* d, const char* host, int slot) {
  banned_t* b = find_banned(d, host, d->job->args->blacklist_slots ? slot : -1);
  if (b == NULL || b->until_ms == 0) return 0;
  if (b->until_ms < 0 || hvds__now_ms() < b->until_ms) return 1;
  char name[HVDS_HOST_NAME_MAX + 16];
  fprintf(stderr, "hvdsparse: elastic: %s's cool-down is over; it may be used again\n",
          banned_name(b, name, sizeof name));
  b->until_ms = 0;  // its failures still count toward the next cool-down
  return 0;
}

/* Horovod's cool-down: MIN * 2^failures plus up to MIN at random, within [MIN, MAX]. */
static double cooldown_s(const hvds_run_args_t* a, int failures) {
  double s = a->cooldown_min * (double)(1 << (failures < 20 ? failures : 20)) +
             a->cooldown_min * ((double)rand() / RAND_MAX);
  return s < a->cooldown_min ? a->cooldown_min : s > a->cooldown_max ? a->cooldown_max : s;
}

/* Takes the failed worker's host (or slot) out of the job; with the host, its other workers
 * leave at the next membership too, as Horovod's blacklist does. */
static void ban(driver_t* d, const hvds_member_t* m) {
  const hvds_run_args_t* a = d->job->args;
  int slot = a->blacklist_slots ? m->slot : -1;
  banned_t* b = find_banned(d, m->host, slot);
  if (b == NULL) {
    banned_t* grown = realloc(d->banned, (size_t)(d->nbanned + 1) * sizeof(*grown));
    if (grown == NULL) return;
    d->banned = grown;
    b = &d->banned[d->nbanned++];
    memset(b, 0, sizeof *b);
    snprintf(b->host, sizeof b->host, "%s", m->host);
    b->slot = slot;
  }
  b->failures++;
  b->until_ms = -1;
  char name[HVDS_HOST_NAME_MAX + 16];
  banned_name(b, name, sizeof name);
  if (a->cooldown_max > 0) {
    double s = cooldown_s(a, b->failures);
    b->until_ms = hvds__now_ms() + (int64_t)(s * 1000);
    fprintf(stderr,
            "hvdsparse: elastic: %s is not used for %.0f s (cool-down after %d "
            "failure%s)\n",
            name, s, b->failures, b->failures == 1 ? "" : "s");
  } else {
    fprintf(stderr, "hvdsparse: elastic: %s is not used again in this job\n", name);
  }
  if (slot >= 0) return;
  for (int i = 0; i < d->ms.n; i++) {
    hvds_member_t* o = &d->ms.m[i];
    if (o == m || o->w.exited || o->removed || strcmp(o->host, m->host) != 0) continue;
    fprintf(stderr, "hvdsparse: elastic: %s failed a worker; rank %d (%s:%d) leaves the job\n",
            m->host, o->rank, o->host, o->slot);
    o->removed = 1;
  }
}

/* rank and size: what the worker will have in the next membership (ranked survivors first, then
 * new workers in start order), given it in HOROVOD_RANK and HOROVOD_SIZE as Horovod gives a
 * worker its assigned rank at start; the runtime takes the published membership's instead. */
static hvds_result_t start_worker(driver_t* d, const char* host, int slot, int rank, int size) {
  hvds_member_t* m = hvds__members_add(&d->ms, host, slot);
  if (m == NULL) {
    fprintf(stderr, "hvdsparse: elastic: no room to start another worker on %s\n", host);
    return HVDS_SYSTEM_ERROR;
  }
  // The worker's spawn-time local rank is its slot: with its host name it names the worker in
  // the store (runtime/elastic_join.c).
  hvds_slot_t s = {m->host, rank, size, slot, 1, 0, 1};
  hvds_job_t one = *d->job;
  one.slots = &s;
  one.np = 1;
  if (hvds__spawn_worker(&one, 0, &m->w) != HVDS_SUCCESS) {
    fprintf(stderr, "hvdsparse: elastic: could not start a worker on %s:%d\n", host, slot);
    d->ms.n--;
    return HVDS_SYSTEM_ERROR;
  }
  int index = (int)(m - d->ms.m);
  hvds__output_add(d->output, index, 0, m->w.out_fd);
  hvds__output_add(d->output, index, 1, m->w.err_fd);
  return HVDS_SUCCESS;
}

static int free_slot(driver_t* d, const hvds_host_t* host, int s) {
  return !hvds__members_live_on(&d->ms, host->name, s) && !is_banned(d, host->name, s);
}

/* Starts workers on free slots of hosts, up to --max-np; returns how many. */
static int fill_slots(driver_t* d, const hvds_host_t* hosts, int nhosts) {
  int live = hvds__members_live(&d->ms), planned = 0;
  for (int h = 0; h < nhosts; h++)
    for (int s = 0; s < hosts[h].slots; s++)
      planned += free_slot(d, &hosts[h], s) && (d->max_np <= 0 || live + planned < d->max_np);
  int started = 0;
  for (int h = 0; h < nhosts; h++)
    for (int s = 0; s < hosts[h].slots; s++) {
      if (started == planned) return started;
      if (free_slot(d, &hosts[h], s) &&
          start_worker(d, hosts[h].name, s, live + started, live + planned) == HVDS_SUCCESS)
        started++;
    }
  return started;
}

static int listed(const hvds_host_t* hosts, int nhosts, const char* host, int slot) {
  for (int h = 0; h < nhosts; h++)
    if (strcmp(hosts[h].name, host) == 0) return slot < hosts[h].slots;
  return 0;
}

/* Takes the workers whose slot the script no longer lists out of the next membership; they
 * learn it at their next commit and end (hvd.elastic.run exits them with 0). */
static int remove_unlisted(driver_t* d, const hvds_host_t* hosts, int nhosts) {
  int removed = 0;
  for (int i = 0; i < d->ms.n; i++) {
    hvds_member_t* m = &d->ms.m[i];
    if (m->w.exited || m->removed || listed(hosts, nhosts, m->host, m->slot)) continue;
    fprintf(stderr, "hvdsparse: elastic: the discovery script no longer lists %s:%d; rank %d "
            "leaves the job\n", m->host, m->slot, m->rank);
    m->removed = 1;
    removed++;
  }
  return removed;
}

static void discover(driver_t* d) {
  const hvds_run_args_t* a = d->job->args;
  hvds_host_t* hosts = NULL;
  int nhosts = 0;
  char err[512];
  d->next_discovery = hvds__now_ms() + DISCOVERY_INTERVAL_MS;
  if (hvds__discover_hosts(a->discovery_script, a->slots_per_host, &hosts, &nhosts, err,
                           sizeof err) != HVDS_SUCCESS) {
    fprintf(stderr, "hvdsparse: elastic: %s; keeping the current hosts\n", err);
    return;
  }
  int removed = remove_unlisted(d, hosts, nhosts);
  int started = fill_slots(d, hosts, nhosts);
  if (started > 0 || removed > 0)
    snprintf(d->pending, sizeof d->pending, "the discovery script listed %d new slot%s and "
             "dropped %d", started, started == 1 ? "" : "s", removed);
  free(hosts);
}

/* Notes the workers that exited since the last look. */
static void observe_exits(driver_t* d) {
  for (int i = 0; i < d->ms.n; i++) {
    hvds_member_t* m = &d->ms.m[i];
    if (m->w.exited) continue;
    siginfo_t info;
    memset(&info, 0, sizeof info);
    if (waitid(P_PID, (id_t)m->w.pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0)
      continue;
    m->w.exited = 1;
    m->w.signaled = info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED;
    m->w.status = info.si_status;
    if (!m->w.signaled && m->w.status == 0) {  // finished
      if (!m->removed) d->finishing = 1;
      continue;
    }
    if (d->ended || m->removed) continue;  // a removed worker may end as it likes
    char what[160];
    snprintf(what, sizeof what, "rank %d exited with %s %d%s", m->rank,
             m->w.signaled ? "signal" : "status code", m->w.status,
             m->silenced ? ", ended by the launcher: it stopped responding" : "");
    fprintf(stderr, "hvdsparse: elastic: worker %s:%d (%s); %s\n", m->host, m->slot, what,
            d->finishing ? "the job was ending (a worker had finished)"
                         : "re-forming the job without it");
    // The survivors' errors name it (runtime/fault_record.c reads hvds/<job>.e<N>/failed).
    char key[256];
    snprintf(key, sizeof key, "hvds/%s.e%d/failed", d->job->job_id, d->ms.epoch);
    hvds__store_server_set(d->store, key, what, strlen(what));
    ban(d, m);
    snprintf(d->pending, sizeof d->pending, "worker %.200s:%d failed", m->host, m->slot);
  }
}

/* Ends the worker its peers found unresponsive (runtime/fault_cause.c): it may be hung or cut
 * off the network, and the job cannot re-form while it runs. Its exit is then a failure like
 * any other (observe_exits). */
static void end_silent(driver_t* d) {
  if (d->ms.epoch <= 0) return;
  char job[256], key[320], val[16];
  snprintf(job, sizeof job, "%s.e%d", d->job->job_id, d->ms.epoch);
  snprintf(key, sizeof key, HVDS_KEY_SILENT, job);
  if (hvds__store_server_get(d->store, key, val, sizeof val) != 1) return;
  int rank = atoi(val);
  for (int i = 0; i < d->ms.n; i++) {
    hvds_member_t* m = &d->ms.m[i];
    if (m->rank != rank || m->w.exited || m->removed || m->silenced) continue;
    fprintf(stderr,
            "hvdsparse: elastic: worker %s:%d (rank %d) stopped responding: its peers "
            "timed out waiting for it; ending it\n",
            m->host, m->slot, m->rank);
    m->silenced = 1;
    kill_group(&m->w, SIGKILL);
  }
}

/* Whether m read membership `epoch` (runtime/elastic_join.c marks it in the store). */
static int read_membership(driver_t* d, const hvds_member_t* m, int epoch) {
  char id[HVDS_HOST_NAME_MAX + 16], key[512], val[4];
  snprintf(id, sizeof id, "%s:%d", m->host, m->slot);
  snprintf(key, sizeof key, HVDS_KEY_ELASTIC_READ, d->job->job_id, (long long)epoch, id);
  return hvds__store_server_get(d->store, key, val, sizeof val) == 1;
}

/* Whether m, which exited, left the newest membership unformed: it joined an earlier one and
 * never read the newest. A worker that never joined any (a command that does not use hvdsparse,
 * as `python -V`) says nothing about the others, which run to their own end. */
static int left_newest_unformed(driver_t* d, const hvds_member_t* m) {
  if (m->rank < 0 || !m->w.exited || read_membership(d, m, d->ms.epoch)) return 0;
  for (int e = d->ms.epoch - 1; e >= 1; e--)
    if (read_membership(d, m, e)) return 1;
  return 0;
}

/* The job finished while the newest membership was forming: a worker of it exited without ever
 * reading it, so its rendezvous can never complete. Its workers still running wait for it; they
 * are ended and left out of the outcome (Horovod's driver stops them too), instead of failing
 * at their start timeout and turning a finished job into a failed one. */
static void end_stranded(driver_t* d) {
  int blocked = 0;
  for (int i = 0; i < d->ms.n && !blocked; i++) blocked = left_newest_unformed(d, &d->ms.m[i]);
  if (!blocked) return;
  for (int i = 0; i < d->ms.n; i++) {
    hvds_member_t* m = &d->ms.m[i];
    if (m->w.exited || m->removed) continue;
    fprintf(stderr,
            "hvdsparse: elastic: the job finished before membership %d formed; ending "
            "worker %s:%d, which waited for it\n",
            d->ms.epoch, m->host, m->slot);
    m->removed = 1;
    m->rank = -1;
    kill_group(&m->w, SIGTERM);
    kill_group(&m->w, SIGCONT);
  }
}

/* Publishes the membership that is due, or ends the job when it cannot be. */
static void reform(driver_t* d, int64_t* kill_at) {
  int live = hvds__members_live(&d->ms);
  if (d->finishing || live == 0) {  // the job is ending on its own
    d->pending[0] = '\0';
    return;
  }
  if (live < d->min_np) {
    if (d->below_since < 0) {
      d->below_since = hvds__now_ms();
      fprintf(stderr, "hvdsparse: elastic: %d worker%s left, below --min-np %d; waiting up to %g s "
              "(--elastic-timeout) for more\n", live, live == 1 ? "" : "s", d->min_np,
              d->timeout_s);
    }
    if (hvds__now_ms() - d->below_since >= (int64_t)(d->timeout_s * 1000)) {
      fprintf(stderr, "hvdsparse: elastic: fewer than --min-np %d workers (%d) for %g s "
              "(--elastic-timeout); ending the job\n", d->min_np, live, d->timeout_s);
      d->failed = 1;
      *kill_at = terminate_all(d, SIGTERM);
    }
    return;
  }
  d->below_since = -1;
  if (d->ms.epoch > 0 && d->job->args->reset_limit > 0 &&
      d->resets >= d->job->args->reset_limit) {
    fprintf(stderr, "hvdsparse: elastic: %s, but the job already changed membership %d time%s "
            "(--reset-limit %d); ending the job\n", d->pending, d->resets,
            d->resets == 1 ? "" : "s", d->job->args->reset_limit);
    if (d->job->args->horovod_alias)  // Horovod's words, for what scans the log for them
      fprintf(stderr,
              "Horovod was shutdown because number of resets during elastic job "
              "exceeded limit: %d\n",
              d->job->args->reset_limit);
    d->failed = 1;
    *kill_at = terminate_all(d, SIGTERM);
    return;
  }
  if (d->ms.epoch > 0) d->resets++;
  if (hvds__members_publish(&d->ms, d->store, d->job->job_id, d->pending) != HVDS_SUCCESS) {
    fprintf(stderr, "hvdsparse: elastic: cannot publish the membership; ending the job\n");
    d->failed = 1;
    *kill_at = terminate_all(d, SIGTERM);
  }
  d->pending[0] = '\0';
}

static void handle_signals(driver_t* d, int64_t* kill_at) {
  unsigned char sigs[64];
  ssize_t n;
  while ((n = read(hvds__supervise_signal_fd(), sigs, sizeof sigs)) > 0)
    for (ssize_t i = 0; i < n; i++) {
      if (sigs[i] == SIGCHLD) continue;
      if (d->stop_signal) {
        for (int k = 0; k < d->ms.n; k++) kill_group(&d->ms.m[k].w, SIGKILL);
        continue;
      }
      fprintf(stderr, "hvdsparse: received signal %d; terminating workers.\n", sigs[i]);
      d->stop_signal = sigs[i];
      *kill_at = terminate_all(d, sigs[i] == SIGHUP ? SIGTERM : sigs[i]);
    }
}

/* Runs until every worker has exited. */
static void supervise(driver_t* d) {
  int64_t kill_at = -1;
  struct pollfd* pfds = calloc((size_t)(2 * d->ms.cap + 1), sizeof(*pfds));
  if (pfds == NULL) {
    d->failed = 1;
    kill_at = terminate_all(d, SIGKILL);
  }
  while (pfds != NULL && hvds__members_running(&d->ms) > 0) {
    pfds[0] = (struct pollfd){hvds__supervise_signal_fd(), POLLIN, 0};
    int n = 1 + hvds__output_pollfds(d->output, pfds + 1, 2 * d->ms.cap);
    if (poll(pfds, (nfds_t)n, TICK_MS) > 0) {
      if (pfds[0].revents) handle_signals(d, &kill_at);
      hvds__output_handle(d->output, pfds + 1, n - 1);
    }
    observe_exits(d);
    if (!d->ended && !d->finishing) end_silent(d);
    if (!d->ended && d->finishing) end_stranded(d);
    if (!d->ended && !d->finishing && d->job->args->discovery_script &&
        hvds__now_ms() >= d->next_discovery)
      discover(d);
    if (!d->ended && (d->pending[0] || d->below_since >= 0)) reform(d, &kill_at);
    if (kill_at >= 0 && hvds__now_ms() >= kill_at) {
      for (int i = 0; i < d->ms.n; i++) kill_group(&d->ms.m[i].w, SIGKILL);
      kill_at = -1;
    }
  }
  free(pfds);
}

/* Kills what is left in the groups, drains the pipes, reaps every worker. */
static void finish(driver_t* d) {
  for (int i = 0; i < d->ms.n; i++) kill_group(&d->ms.m[i].w, SIGKILL);
  struct pollfd* pfds = calloc((size_t)(2 * d->ms.cap + 1), sizeof(*pfds));
  int64_t deadline = hvds__now_ms() + DRAIN_MS;
  while (pfds != NULL && hvds__output_open(d->output) > 0 && hvds__now_ms() < deadline) {
    int n = hvds__output_pollfds(d->output, pfds, 2 * d->ms.cap);
    if (poll(pfds, (nfds_t)n, (int)(deadline - hvds__now_ms())) > 0)
      hvds__output_handle(d->output, pfds, n);
  }
  free(pfds);
  for (int i = 0; i < d->ms.n; i++)
    while (d->ms.m[i].w.pid > 0 && waitpid(d->ms.m[i].w.pid, NULL, 0) < 0 && errno == EINTR) {
    }
}

/* 0 when every worker of the last membership exited 0. */
static int outcome(const driver_t* d) {
  if (d->stop_signal) return 128 + d->stop_signal;
  if (d->failed) return 1;
  for (int i = 0; i < d->ms.n; i++) {
    const hvds_worker_t* w = &d->ms.m[i].w;
    if (d->ms.m[i].rank >= 0 && (w->signaled || w->status != 0)) {
      fprintf(stderr, "hvdsparse: elastic: rank %d of the last membership exited with %s %d\n",
              d->ms.m[i].rank, w->signaled ? "signal" : "status code", w->status);
      hvds__report_first_failure(d->job->args, d->ms.m[i].rank,
                                 w->signaled ? 128 + w->status : w->status);
      return 1;
    }
  }
  return 0;
}

int hvds__elastic_run(hvds_job_t* job, hvds_store_server_t* store) {
  const hvds_run_args_t* a = job->args;
  driver_t d;
  memset(&d, 0, sizeof d);
  d.job = job;
  d.store = store;
  d.min_np = a->min_np > 0 ? a->min_np : job->np;
  d.max_np = a->max_np;
  d.timeout_s = a->elastic_timeout >= 0 ? a->elastic_timeout : HVDS_ELASTIC_TIMEOUT_DEFAULT;
  d.below_since = -1;
  // Every worker ever started keeps its entry (and output index): room for the largest job plus
  // as many replacements.
  int most = d.max_np > job->np ? d.max_np : job->np;
  d.ms.cap = 4 * most + 16;
  d.ms.m = calloc((size_t)d.ms.cap, sizeof(hvds_member_t));
  int code = 1;
  if (d.ms.m == NULL || hvds__supervise_install_signals() != HVDS_SUCCESS ||
      hvds__output_create(d.ms.cap, a->output_filename, STDOUT_FILENO, STDERR_FILENO,
                          &d.output) != HVDS_SUCCESS)
    goto done;
  hvds__output_set_timestamps(d.output, a->prefix_timestamp);
  for (int r = 0; r < job->np; r++)
    if (start_worker(&d, job->slots[r].hostname, job->slots[r].local_rank, r, job->np) !=
        HVDS_SUCCESS) {
      d.failed = 1;
      terminate_all(&d, SIGTERM);
      break;
    }
  if (!d.failed) {
    snprintf(d.pending, sizeof d.pending, "start");
    reform(&d, &(int64_t){-1});
  }
  d.next_discovery = hvds__now_ms() + DISCOVERY_INTERVAL_MS;
  supervise(&d);
  finish(&d);
  code = outcome(&d);
done:
  hvds__output_destroy(d.output);
  free(d.ms.m);
  free(d.banned);
  return code;
}
