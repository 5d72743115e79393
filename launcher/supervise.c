/* Supervisor loop: one thread, poll() over a signal self-pipe and the workers' output pipes.
 *
 * Worker exits are observed with waitid(WNOWAIT), which leaves the zombie in place: its pid,
 * and so its process group id, cannot be reused until the very end, so kill(-pgid) can never
 * hit an unrelated group. Zombies are reaped only after every group has been killed.
 */
#define _GNU_SOURCE
#include "supervise.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "arrivals.h"
#include "clock.h"
#include "exit_clock.h"
#include "log.h"
#include "store_keys.h"

#define TICK_MS 1000
#define DRAIN_MS 2000

/* The self-pipe written by the signal handler; process-wide by nature. */
static int sig_pipe[2] = {-1, -1};

static void on_signal(int sig) {
  int saved = errno;
  unsigned char b = (unsigned char)sig;
  (void)!write(sig_pipe[1], &b, 1);
  errno = saved;
}

hvds_result_t hvds__supervise_install_signals(void) {
  if (sig_pipe[0] < 0 && pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return HVDS_SYSTEM_ERROR;
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  sigemptyset(&sa.sa_mask);
  static const int sigs[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP};
  for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
    if (sigaction(sigs[i], &sa, NULL) != 0) return HVDS_SYSTEM_ERROR;
  signal(SIGPIPE, SIG_IGN);
  return HVDS_SUCCESS;
}

int hvds__supervise_signal_fd(void) { return sig_pipe[0]; }

static void kill_group(const hvds_worker_t* w, int sig) {
  if (kill(-w->pid, sig) != 0 && errno == ESRCH) kill(w->pid, sig);
}

/* Observes exits without reaping. Returns the number of workers that exited just now. */
static int observe_exits(hvds_worker_t* workers, int n, int first_new[], int max_new) {
  int count = 0;
  for (int i = 0; i < n; i++) {
    hvds_worker_t* w = &workers[i];
    if (w->exited) continue;
    siginfo_t info;
    memset(&info, 0, sizeof(info));
    if (waitid(P_PID, (id_t)w->pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0)
      continue;
    w->exited = 1;
    w->signaled = info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED;
    w->status = info.si_status;
    if (count < max_new) first_new[count] = i;
    count++;
  }
  return count;
}

static int live_count(const hvds_worker_t* workers, int n) {
  int live = 0;
  for (int i = 0; i < n; i++) live += !workers[i].exited;
  return live;
}

void hvds__report_first_failure(const hvds_run_args_t* args, int rank, int exit_code) {
  fprintf(stderr,
          "%s detected that one or more processes exited with non-zero status, thus causing the "
          "job to be terminated. The first process to do so was:\nProcess name: %d\nExit code: "
          "%d\n",
          args != NULL && args->horovod_alias ? "Horovod" : "hvdsparse", rank, exit_code);
}

/* Exit code as a shell reports it: the status, or 128 + signal. */
static int exit_code(const hvds_worker_t* w) { return w->signaled ? 128 + w->status : w->status; }

typedef struct {
  hvds_supervisor_t* sv;
  int terminating;    /* SIGTERM sent to every group */
  int64_t kill_at;    /* when to send SIGKILL; -1 when not pending */
  int64_t term_at;    /* after a failure: when to send SIGTERM; -1 when not pending */
  int first_failed;   /* index of the first failed worker, or -1 */
  int stop_signal;    /* signal that told the launcher to stop, or 0 */
  hvds_arrivals_t arrivals; /* ranks that reached rendezvous */
  int late_reported;  /* the ranks missing at the start timeout were named */
  int64_t next_tick;
} state_t;

static void terminate_all(state_t* st, int sig) {
  for (int i = 0; i < st->sv->np; i++) {
    kill_group(&st->sv->workers[i], sig);
    // A stopped worker (SIGSTOP, Ctrl-Z) would hold the signal until SIGKILL: wake it to act.
    if (sig != SIGKILL) kill_group(&st->sv->workers[i], SIGCONT);
  }
  if (!st->terminating) st->kill_at = hvds__now_ms() + HVDS_GRACE_SECONDS * 1000;
  st->terminating = 1;
}

static void on_failure(state_t* st, const hvds_worker_t* w) {
  char what[128];
  if (w->signaled) {
    fprintf(stderr, "Process %d terminated by signal %d.\n", w->rank, w->status);
    snprintf(what, sizeof(what), "rank %d exited with signal %d", w->rank, w->status);
  } else {
    fprintf(stderr, "Process %d exit with status code %d.\n", w->rank, w->status);
    snprintf(what, sizeof(what), "rank %d exited with status code %d", w->rank, w->status);
  }
  fprintf(stderr, "Terminating remaining workers after failure of Process %d.\n", w->rank);
  fflush(stderr);
  if (st->sv->store != NULL) {
    char key[128];
    snprintf(key, sizeof(key), HVDS_KEY_FAILED, st->sv->job->job_id);
    hvds__store_server_set(st->sv->store, key, what, strlen(what));
  }
  st->first_failed = (int)(w - st->sv->workers);
  /* The survivors see the broken connections at once and fail with an error that names the
   * dead rank; give them a moment to say so before they are terminated. */
  st->term_at = hvds__now_ms() + HVDS_SETTLE_MS;
}

static void handle_signals(state_t* st) {
  unsigned char sigs[64];
  ssize_t n;
  while ((n = read(sig_pipe[0], sigs, sizeof(sigs))) > 0) {
    for (ssize_t i = 0; i < n; i++) {
      int sig = sigs[i];
      if (sig == SIGCHLD) continue;  // exits are observed after every wake-up
      if (st->stop_signal != 0 || (st->terminating && st->first_failed < 0)) {
        fprintf(stderr, "hvdsparse: signal %d again; killing every worker now.\n", sig);
        for (int k = 0; k < st->sv->np; k++) kill_group(&st->sv->workers[k], SIGKILL);
        continue;
      }
      fprintf(stderr, "hvdsparse: received signal %d; terminating workers.\n", sig);
      st->stop_signal = sig;
      // Forward the same signal, then the grace time and SIGKILL as after a failure.
      terminate_all(st, sig == SIGHUP ? SIGTERM : sig);
    }
  }
}

/* Follows the ranks reaching rendezvous: progress with --verbose, and once the start timeout
 * has passed since the first arrived, the ranks still missing (their peers fail then, waiting
 * for them). */
static void arrivals_tick(state_t* st) {
  hvds_supervisor_t* sv = st->sv;
  hvds_arrivals_t* a = &st->arrivals;
  if (sv->store == NULL || a->arrived == NULL || a->count >= sv->np) return;
  char missing[256];
  if (hvds__arrivals_update(a, sv->store, sv->job->job_id, hvds__now_ms()) && sv->verbose) {
    hvds__arrivals_missing(a, missing, sizeof(missing));
    if (a->count < sv->np)
      fprintf(stderr, "hvdsparse: %d/%d ranks reached rendezvous; waiting for %s\n", a->count,
              sv->np, missing);
    else
      fprintf(stderr, "hvdsparse: all %d ranks reached rendezvous.\n", sv->np);
  }
  if (a->count == 0 || a->count >= sv->np || st->late_reported || sv->start_timeout <= 0 ||
      hvds__now_ms() - a->first_ms < (int64_t)(sv->start_timeout * 1000))
    return;
  hvds__arrivals_missing(a, missing, sizeof(missing));
  fprintf(stderr,
          "hvdsparse: rank %s did not reach rendezvous within the start timeout (%g s after the "
          "first rank did; --start-timeout or HVDSPARSE_START_TIMEOUT). Please check that it "
          "started and can reach this host; you may need to increase --start-timeout.\n",
          missing, sv->start_timeout);
  st->late_reported = 1;
}

/* Reads the arrivals from the store now: the tick reads them once a second, and a decision
 * taken on an older view would count ranks that arrived since then as absent. */
static void refresh_arrivals(state_t* st) {
  hvds_arrivals_t* a = &st->arrivals;
  if (st->sv->store != NULL && a->arrived != NULL && a->count < st->sv->np)
    hvds__arrivals_update(a, st->sv->store, st->sv->job->job_id, hvds__now_ms());
}

/* 1 when every worker still running never reached rendezvous although others did: nobody is
 * left to explain a failure, so the teardown need not wait for explanations. */
static int only_absent_left(state_t* st) {
  refresh_arrivals(st);
  const hvds_arrivals_t* a = &st->arrivals;
  if (a->arrived == NULL || a->count == 0) return 0;
  for (int i = 0; i < st->sv->np; i++)
    if (!st->sv->workers[i].exited && a->arrived[st->sv->workers[i].rank]) return 0;
  return 1;
}

/* Of the n workers idx[] that exited in one wake-up, the one that failed first, or -1. The
 * supervisor may have been off the CPU while several exited: a peer that failed because the
 * first one died is often seen alongside it, and index order would name the wrong one. */
static int first_failure(const hvds_supervisor_t* sv, const int* idx, int n) {
  pid_t pids[n > 0 ? n : 1];
  double exit_ms[n > 0 ? n : 1];
  for (int i = 0; i < n; i++) pids[i] = sv->workers[idx[i]].pid;
  if (n > 1) hvds__exit_times_ms(pids, n, exit_ms);
  int best = -1;
  double best_ms = 0;
  for (int i = 0; i < n; i++) {
    const hvds_worker_t* w = &sv->workers[idx[i]];
    if (!w->signaled && w->status == 0) continue;
    double ms = n > 1 ? exit_ms[i] : -1;
    if (best < 0 || (ms >= 0 && (best_ms < 0 || ms < best_ms))) {
      best = idx[i];
      best_ms = ms;
    }
  }
  return best;
}

/* After every worker exited: kill what is left in their groups, drain the pipes, reap. */
static void finish(state_t* st) {
  hvds_supervisor_t* sv = st->sv;
  for (int i = 0; i < sv->np; i++) kill_group(&sv->workers[i], SIGKILL);
  struct pollfd* pfds = calloc((size_t)(2 * sv->np + 1), sizeof(*pfds));
  int64_t deadline = hvds__now_ms() + DRAIN_MS;
  while (pfds != NULL && hvds__output_open(sv->output) > 0 && hvds__now_ms() < deadline) {
    int n = hvds__output_pollfds(sv->output, pfds, 2 * sv->np);
    if (poll(pfds, (nfds_t)n, (int)(deadline - hvds__now_ms())) > 0)
      hvds__output_handle(sv->output, pfds, n);
  }
  free(pfds);
  for (int i = 0; i < sv->np; i++) {
    while (waitpid(sv->workers[i].pid, NULL, 0) < 0 && errno == EINTR) {
    }
  }
}

int hvds__supervise(hvds_supervisor_t* sv) {
  state_t st = {0};
  st.sv = sv;
  st.kill_at = -1;
  st.term_at = -1;
  st.first_failed = -1;
  if (hvds__arrivals_init(&st.arrivals, sv->np) != HVDS_SUCCESS) HVDS_WARN("out of memory");
  struct pollfd* pfds = calloc((size_t)(2 * sv->np + 1), sizeof(*pfds));
  int* exited_now = calloc((size_t)sv->np, sizeof(int));
  if (pfds == NULL || exited_now == NULL) {
    HVDS_ERROR("out of memory supervising workers");
    terminate_all(&st, SIGKILL);
  }
  while (pfds != NULL && exited_now != NULL && live_count(sv->workers, sv->np) > 0) {
    pfds[0] = (struct pollfd){sig_pipe[0], POLLIN, 0};
    int n = 1 + hvds__output_pollfds(sv->output, pfds + 1, 2 * sv->np);
    int64_t now = hvds__now_ms();
    int64_t wake = now + TICK_MS;
    if (st.kill_at >= 0 && st.kill_at < wake) wake = st.kill_at;
    if (st.term_at >= 0 && st.term_at < wake) wake = st.term_at;
    int pr = poll(pfds, (nfds_t)n, wake > now ? (int)(wake - now) : 0);
    if (pr > 0 && pfds[0].revents) handle_signals(&st);
    if (pr > 0) hvds__output_handle(sv->output, pfds + 1, n - 1);
    int k = observe_exits(sv->workers, sv->np, exited_now, sv->np);
    int failed = first_failure(sv, exited_now, k);
    if (failed >= 0 && !st.terminating && st.first_failed < 0)
      on_failure(&st, &sv->workers[failed]);
    if (hvds__now_ms() >= st.next_tick) {
      arrivals_tick(&st);
      st.next_tick = hvds__now_ms() + TICK_MS;
    }
    if (st.term_at >= 0 && only_absent_left(&st)) st.term_at = hvds__now_ms();
    if (st.term_at >= 0 && hvds__now_ms() >= st.term_at) {
      st.term_at = -1;
      if (!st.terminating) terminate_all(&st, SIGTERM);
    }
    if (st.kill_at >= 0 && hvds__now_ms() >= st.kill_at) {
      for (int i = 0; i < sv->np; i++) kill_group(&sv->workers[i], SIGKILL);
      st.kill_at = -1;
    }
  }
  free(pfds);
  free(exited_now);
  finish(&st);
  refresh_arrivals(&st);
  char absent[256] = "";
  if (st.arrivals.count > 0 && st.arrivals.count < sv->np)
    hvds__arrivals_missing(&st.arrivals, absent, sizeof(absent));
  hvds__arrivals_free(&st.arrivals);
  if (st.first_failed >= 0) {
    const hvds_worker_t* w = &sv->workers[st.first_failed];
    hvds__report_first_failure(sv->job->args, w->rank, exit_code(w));
    // A rank that stopped first with a reason (an uncaught exception) said why through the
    // store: it is the cause, even when a peer exited before it.
    char key[160], why[700];
    snprintf(key, sizeof(key), HVDS_KEY_STOP_FIRST, sv->job->job_id);
    if (sv->store != NULL && hvds__store_server_get(sv->store, key, why, sizeof(why)))
      fprintf(stderr, "%s\n", why);
    if (absent[0])
      fprintf(stderr, "Rank %s never reached rendezvous (the others waited for it up to the "
              "start timeout, %g s).\n", absent, sv->start_timeout);
    return 1;
  }
  return st.stop_signal ? 128 + st.stop_signal : 0;
}

void hvds__supervise_abort(hvds_worker_t* workers, int n) {
  for (int i = 0; i < n; i++) kill_group(&workers[i], SIGTERM);
  int64_t deadline = hvds__now_ms() + HVDS_GRACE_SECONDS * 1000;
  int dummy[1];
  while (live_count(workers, n) > 0 && hvds__now_ms() < deadline) {
    observe_exits(workers, n, dummy, 0);
    struct timespec ts = {0, 50 * 1000000L};
    nanosleep(&ts, NULL);
  }
  for (int i = 0; i < n; i++) kill_group(&workers[i], SIGKILL);
  for (int i = 0; i < n; i++) {
    while (waitpid(workers[i].pid, NULL, 0) < 0 && errno == EINTR) {
    }
  }
}
