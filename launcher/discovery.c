/* Running the host discovery script. */
#define _GNU_SOURCE
#include "discovery.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

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

hvds_result_t hvds__discover_hosts(const char* script, int slots_per_host, hvds_host_t** hosts,
                                   int* nhosts, char* err, size_t errlen) {
  *hosts = NULL;
  *nhosts = 0;
  FILE* f = popen(script, "re");
  if (f == NULL) {
    snprintf(err, errlen, "cannot run the host discovery script %s: %s", script, strerror(errno));
    return HVDS_SYSTEM_ERROR;
  }
  hvds_host_t* list = NULL;
  int n = 0, cap = 0, bad = 0;
  char line[1024];
  while (fgets(line, sizeof line, f) != NULL)
    if (!bad && add_line(line, slots_per_host, &list, &n, &cap) != 0) {
      snprintf(err, errlen, "the host discovery script %s printed '%.200s', not host[:slots]",
               script, line);
      bad = 1;
    }
  int status = pclose(f);
  if (!bad && (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
    snprintf(err, errlen, "the host discovery script %s failed (status %d)", script,
             status == -1 ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
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
