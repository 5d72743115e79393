/* Exit times from the scheduler's clock, made comparable across CPUs.
 *
 * A zombie's /proc/<pid>/sched "se.exec_start" is when it last ran: its exit. That clock is
 * the runqueue's task clock, one per CPU, which leaves out steal and interrupt time, so two
 * CPUs' clocks drift apart by seconds on a virtual machine. Each CPU's clock is read against
 * CLOCK_MONOTONIC by running on that CPU for a moment; a zombie's exit is then placed on the
 * monotonic clock through the offset of the CPU it died on (field 39 of /proc/<pid>/stat).
 */
#define _GNU_SOURCE
#include "exit_clock.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"

/* "se.exec_start" of /proc/<path>/sched in ms, or -1. */
static double exec_start_ms(const char* path) {
  char line[256];
  FILE* f = fopen(path, "r");
  double ms = -1;
  while (f != NULL && ms < 0 && fgets(line, sizeof(line), f) != NULL)
    if (strncmp(line, "se.exec_start", 13) == 0) sscanf(strchr(line, ':') + 1, "%lf", &ms);
  if (f != NULL) fclose(f);
  return ms;
}

/* The CPU pid last ran on, or -1: field 39 of /proc/<pid>/stat, counted after the command. */
static int last_cpu(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  FILE* f = fopen(path, "r");
  size_t len = f != NULL ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
  if (f != NULL) fclose(f);
  buf[len] = '\0';
  char* p = strrchr(buf, ')');
  for (int field = 2; p != NULL && field < 39; field++) p = strchr(p + 1, ' ');
  return p != NULL ? atoi(p + 1) : -1;
}

/* CLOCK_MONOTONIC minus CPU cpu's task clock, in ms; 0 with *ok = 0 where we cannot run there. */
static double cpu_offset_ms(int cpu, int* ok) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  *ok = 0;
  if (cpu < 0 || cpu >= CPU_SETSIZE ||
      pthread_setaffinity_np(pthread_self(), sizeof(one), &one) != 0)
    return 0;
  sched_yield();  // a switch stamps our exec_start with the CPU's clock now
  double mono = (double)hvds__now_ns() / 1e6;
  double task = exec_start_ms("/proc/thread-self/sched");
  *ok = task >= 0 && sched_getcpu() == cpu;
  return mono - task;
}

void hvds__exit_times_ms(const pid_t* pids, int n, double* exit_ms) {
  cpu_set_t saved;
  int restore = pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved) == 0;
  for (int i = 0; i < n; i++) exit_ms[i] = -1;
  for (int i = 0; i < n; i++) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/sched", (int)pids[i]);
    double task = exec_start_ms(path);
    int cpu = last_cpu(pids[i]), ok = 0;
    if (task < 0 || cpu < 0 || (restore && !CPU_ISSET(cpu, &saved))) continue;
    double offset = cpu_offset_ms(cpu, &ok);
    if (ok) exit_ms[i] = task + offset;
  }
  if (restore) pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
}
