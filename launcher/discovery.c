/* Running the host discovery script. */
#define _GNU_SOURCE
#include "discovery.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"

/* Adds or updates one "host[:slots]" line; -1 when it is not one. */
static int add_line(char* line, int slots_per_host, hvds_host_t** hosts, int* n, int* cap) {
  line[strcspn(line, "\r\n")] = '\0';
  char* start = line + strspn(line, " \t");
  if (*start == '\0' || *start == '#') return 0;
  char* colon = strrchr(start, ':');
  int slots = slots_per_host > 0 ? slots_per_host : 1;
  if (colon != NULL) {
    char* end;
    long v = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || (*end != '\0' && *end != ' ' && *end != '\t') || v < 0) return -1;
    slots = (int)v;
    *colon = '\0';
  } else {
    start[strcspn(start, " \t")] = '\0';
  }
  if (strlen(start) == 0 || strlen(start) >= HVDS_HOST_NAME_MAX) return -1;
  for (int i = 0; i < *n; i++) {
    if (strcmp((*hosts)[i].name, start) == 0) {
      (*hosts)[i].slots = slots;
      return 0;
    }
  }
  if (*n == *cap) {
    int c = *cap ? *cap * 2 : 8;
    hvds_host_t* h = realloc(*hosts, (size_t)c * sizeof(*h));
    if (h == NULL) return -1;
    *hosts = h;
    *cap = c;
  }
  snprintf((*hosts)[*n].name, HVDS_HOST_NAME_MAX, "%s", start);
  (*hosts)[*n].slots = slots;
  (*n)++;
  return 0;
}

/* Starts /bin/sh -c script in its own process group with stdout on a pipe; -1 on failure. */
static pid_t start_script(const char* script, int* out_fd) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    dup2(p[1], STDOUT_FILENO);
    execl("/bin/sh", "sh", "-c", script, (char*)NULL);
    _exit(127);
  }
  close(p[1]);
  if (pid < 0) {
    close(p[0]);
    return -1;
  }
  *out_fd = p[0];
  return pid;
}

/* Reads the script's output until it closes stdout or the timeout passes; 0, or -1 on timeout. */
static int read_output(int fd, char* buf, size_t cap, size_t* len) {
  int64_t deadline = hvds__now_ms() + HVDS_DISCOVERY_TIMEOUT_MS;
  *len = 0;
  for (;;) {
    int64_t left = deadline - hvds__now_ms();
    struct pollfd pfd = {fd, POLLIN, 0};
    if (left <= 0) return -1;
    int n = poll(&pfd, 1, (int)left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    char chunk[4096];
    ssize_t got = read(fd, chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return 0;
    size_t take = (size_t)got < cap - 1 - *len ? (size_t)got : cap - 1 - *len;
    memcpy(buf + *len, chunk, take);
    *len += take;
  }
}

hvds_result_t hvds__discover_hosts(const char* script, int slots_per_host, hvds_host_t** hosts,
                                   int* nhosts, char* err, size_t errlen) {
  *hosts = NULL;
  *nhosts = 0;
  int fd = -1;
  pid_t pid = start_script(script, &fd);
  if (pid < 0) {
    snprintf(err, errlen, "cannot run the host discovery script %s: %s", script, strerror(errno));
    return HVDS_SYSTEM_ERROR;
  }
  static char out[1 << 16];  // the launcher's one thread runs the script
  size_t len = 0;
  int timed_out = read_output(fd, out, sizeof out, &len) != 0;
  close(fd);
  if (timed_out) kill(-pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    snprintf(err, errlen, "the host discovery script %s did not finish within %d s", script,
             HVDS_DISCOVERY_TIMEOUT_MS / 1000);
    return HVDS_TIMEOUT;
  }
  out[len] = '\0';
  hvds_host_t* list = NULL;
  int n = 0, cap = 0, bad = 0;
  for (char* line = strtok(out, "\n"); line != NULL && !bad; line = strtok(NULL, "\n"))
    if (add_line(line, slots_per_host, &list, &n, &cap) != 0) {
      snprintf(err, errlen, "the host discovery script %s printed '%.200s', not host[:slots]",
               script, line);
      bad = 1;
    }
  if (!bad && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
    snprintf(err, errlen, "the host discovery script %s failed (status %d)", script,
             WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    bad = 1;
  }
  if (bad) {
    free(list);
    return HVDS_INVALID_ARGUMENT;
  }
  *hosts = list;
  *nhosts = n;
  return HVDS_SUCCESS;
}
