/* The coordinator thread's scheduling priority (thread_priority.h). Linux applies the policy and
 * the nice value per thread (a thread id is a valid PRIO_PROCESS target), so neither the
 * training's threads nor the rest of the process change. */
#define _GNU_SOURCE
#include "thread_priority.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define RT_PRIORITY 1 /* the lowest real-time priority: above normal threads, below the rest */
#define NICE_FALLBACK (-10)

int hvds__priority_mode_parse(const char* text) {
  if (text == NULL || text[0] == '\0' || strcmp(text, "normal") == 0) return HVDS_PRIORITY_NORMAL;
  if (strcmp(text, "auto") == 0) return HVDS_PRIORITY_AUTO;
  if (strcmp(text, "realtime") == 0) return HVDS_PRIORITY_REALTIME;
  return -1;
}

const char* hvds__priority_mode_name(int mode) {
  return mode == HVDS_PRIORITY_AUTO       ? "auto"
         : mode == HVDS_PRIORITY_REALTIME ? "realtime"
                                          : "normal";
}

static pid_t own_tid(void) { return (pid_t)syscall(SYS_gettid); }

static int set_realtime(void) {
  struct sched_param sp = {.sched_priority = RT_PRIORITY};
  return sched_setscheduler(0, SCHED_RR, &sp) == 0 ? 0 : errno;
}

int (*hvds__priority_set_realtime)(void) = set_realtime;

int hvds__priority_raise_self(hvds_priority_mode_t mode, char* got, size_t got_len, char* why,
                              size_t why_len) {
  snprintf(got, got_len, "normal");
  snprintf(why, why_len, "%s", "");
  if (mode == HVDS_PRIORITY_NORMAL) return 0;
  int err = hvds__priority_set_realtime();
  if (err == 0) {
    snprintf(got, got_len, "real-time round-robin %d", RT_PRIORITY);
    return 0;
  }
  snprintf(why, why_len,
           "real-time scheduling is not allowed (%s; it needs CAP_SYS_NICE or an "
           "RLIMIT_RTPRIO of %d or more)",
           strerror(err), RT_PRIORITY);
  if (mode == HVDS_PRIORITY_REALTIME) return -1;
  if (setpriority(PRIO_PROCESS, (id_t)own_tid(), NICE_FALLBACK) == 0) {
    snprintf(got, got_len, "nice %d", NICE_FALLBACK);
    return 0;
  }
  return -1;  // auto: normal is what is left; why says what was refused
}

void hvds__priority_drop_self(void) {
  struct sched_param sp = {.sched_priority = 0};
  (void)sched_setscheduler(0, SCHED_OTHER, &sp);
  (void)setpriority(PRIO_PROCESS, (id_t)own_tid(), 0);
}

int hvds__priority_level(const char* got) {
  return strncmp(got, "real-time", 9) == 0 ? 2 : strncmp(got, "nice", 4) == 0 ? 1 : 0;
}

void hvds__priority_lend(int level, hvds_priority_saved_t* saved) {
  saved->lent = 0;
  int realtime = level == 2, nice = level == 1;
  if (!realtime && !nice) return;
  struct sched_param sp;
  saved->policy = sched_getscheduler(0);
  saved->rt_priority = sched_getparam(0, &sp) == 0 ? sp.sched_priority : 0;
  errno = 0;
  saved->nice = getpriority(PRIO_PROCESS, (id_t)own_tid());
  if (saved->policy < 0 || (saved->nice == -1 && errno != 0)) return;
  if (realtime && saved->policy == SCHED_OTHER)
    saved->lent = hvds__priority_set_realtime() == 0;
  else if (nice && saved->nice > NICE_FALLBACK)
    saved->lent = setpriority(PRIO_PROCESS, (id_t)own_tid(), NICE_FALLBACK) == 0;
}

void hvds__priority_restore(const hvds_priority_saved_t* saved) {
  if (!saved->lent) return;
  struct sched_param sp = {.sched_priority = saved->rt_priority};
  (void)sched_setscheduler(0, saved->policy, &sp);
  (void)setpriority(PRIO_PROCESS, (id_t)own_tid(), saved->nice);
}
