/* Host lists and host assignment, following horovodrun's get_host_assignments. */
#define _GNU_SOURCE
#include "hosts.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_SLOTS_PER_HOST 1000000

/* Appends one host; a name seen before adds its slots to the existing entry. */
static hvds_result_t add_host(hvds_host_t** hosts, int* n, int* cap, const char* name,
                              size_t name_len, int slots, char* err, size_t errlen) {
  if (name_len == 0 || name_len >= HVDS_HOST_NAME_MAX) {
    snprintf(err, errlen, "invalid host name '%.*s'", (int)name_len, name);
    return HVDS_INVALID_ARGUMENT;
  }
  for (int i = 0; i < *n; i++) {
    if (strlen((*hosts)[i].name) == name_len && memcmp((*hosts)[i].name, name, name_len) == 0) {
      (*hosts)[i].slots += slots;
      return HVDS_SUCCESS;
    }
  }
  if (*n == *cap) {
    int ncap = *cap ? *cap * 2 : 8;
    hvds_host_t* h = realloc(*hosts, (size_t)ncap * sizeof(*h));
    if (h == NULL) return HVDS_SYSTEM_ERROR;
    *hosts = h;
    *cap = ncap;
  }
  hvds_host_t* h = &(*hosts)[(*n)++];
  memcpy(h->name, name, name_len);
  h->name[name_len] = '\0';
  h->slots = slots;
  return HVDS_SUCCESS;
}

static int parse_slots(const char* s, size_t len, int* out) {
  if (len == 0 || len > 9) return -1;
  int v = 0;
  for (size_t i = 0; i < len; i++) {
    if (!isdigit((unsigned char)s[i])) return -1;
    v = v * 10 + (s[i] - '0');
  }
  if (v <= 0 || v > MAX_SLOTS_PER_HOST) return -1;
  *out = v;
  return 0;
}

hvds_result_t hvds__hosts_parse(const char* spec, hvds_host_t** hosts, int* nhosts, char* err,
                                size_t errlen) {
  hvds_host_t* list = NULL;
  int n = 0, cap = 0;
  hvds_result_t rc = HVDS_SUCCESS;
  const char* p = spec;
  while (rc == HVDS_SUCCESS && *p) {
    const char* end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    while (len && isspace((unsigned char)*p)) p++, len--;
    while (len && isspace((unsigned char)p[len - 1])) len--;
    if (len > 0) {
      const char* colon = memrchr(p, ':', len);
      int slots = 1;
      size_t name_len = colon ? (size_t)(colon - p) : len;
      if (colon && parse_slots(colon + 1, len - name_len - 1, &slots) != 0) {
        snprintf(err, errlen, "invalid slot count in host '%.*s'", (int)len, p);
        rc = HVDS_INVALID_ARGUMENT;
        break;
      }
      rc = add_host(&list, &n, &cap, p, name_len, slots, err, errlen);
    }
    p = end ? end + 1 : p + strlen(p);
  }
  if (rc == HVDS_SUCCESS && n == 0) {
    snprintf(err, errlen, "no hosts in '%s'", spec);
    rc = HVDS_INVALID_ARGUMENT;
  }
  if (rc != HVDS_SUCCESS) {
    free(list);
    return rc;
  }
  *hosts = list;
  *nhosts = n;
  return HVDS_SUCCESS;
}

/* Parses one hostfile line into list; blank and comment lines add nothing. */
static hvds_result_t parse_line(char* line, int lineno, hvds_host_t** list, int* n, int* cap,
                                char* err, size_t errlen) {
  char* hash = strchr(line, '#');
  if (hash) *hash = '\0';
  char* save = NULL;
  char* name = strtok_r(line, " \t\r\n", &save);
  if (name == NULL) return HVDS_SUCCESS;
  int slots = 1;
  for (char* tok = strtok_r(NULL, " \t\r\n", &save); tok; tok = strtok_r(NULL, " \t\r\n", &save)) {
    if (strncmp(tok, "slots=", 6) == 0 && parse_slots(tok + 6, strlen(tok + 6), &slots) == 0)
      continue;
    snprintf(err, errlen, "hostfile line %d: unexpected '%s' (expected 'host slots=N')", lineno,
             tok);
    return HVDS_INVALID_ARGUMENT;
  }
  char* colon = strrchr(name, ':');
  if (colon && parse_slots(colon + 1, strlen(colon + 1), &slots) == 0) *colon = '\0';
  return add_host(list, n, cap, name, strlen(name), slots, err, errlen);
}

hvds_result_t hvds__hosts_parse_file(const char* path, hvds_host_t** hosts, int* nhosts,
                                     char* err, size_t errlen) {
  FILE* f = fopen(path, "r");
  if (f == NULL) {
    snprintf(err, errlen, "cannot open hostfile %s: %s", path, strerror(errno));
    return HVDS_INVALID_ARGUMENT;
  }
  hvds_host_t* list = NULL;
  int n = 0, cap = 0, lineno = 0;
  hvds_result_t rc = HVDS_SUCCESS;
  char line[1024];
  while (rc == HVDS_SUCCESS && fgets(line, sizeof(line), f)) {
    rc = parse_line(line, ++lineno, &list, &n, &cap, err, errlen);
  }
  fclose(f);
  if (rc == HVDS_SUCCESS && n == 0) {
    snprintf(err, errlen, "hostfile %s lists no hosts", path);
    rc = HVDS_INVALID_ARGUMENT;
  }
  if (rc != HVDS_SUCCESS) {
    free(list);
    return rc;
  }
  *hosts = list;
  *nhosts = n;
  return HVDS_SUCCESS;
}

hvds_result_t hvds__hosts_assign(const hvds_host_t* hosts, int nhosts, int np, hvds_slot_t** slots,
                                 char* err, size_t errlen) {
  long total = 0;
  for (int i = 0; i < nhosts; i++) total += hosts[i].slots;
  if (np <= 0 || total < np) {
    snprintf(err, errlen, "Requested more processes (%d) than there are available slots (%ld)",
             np, total);
    return HVDS_INVALID_ARGUMENT;
  }
  hvds_slot_t* out = calloc((size_t)np, sizeof(*out));
  // cross_count[l]: hosts seen so far that have a rank with local_rank l.
  int* cross_count = calloc((size_t)np, sizeof(int));
  if (out == NULL || cross_count == NULL) {
    free(out);
    free(cross_count);
    return HVDS_SYSTEM_ERROR;
  }
  int rank = 0;
  for (int h = 0; h < nhosts && rank < np; h++) {
    int first = rank;
    for (int l = 0; l < hosts[h].slots && rank < np; l++, rank++) {
      out[rank].hostname = hosts[h].name;
      out[rank].rank = rank;
      out[rank].size = np;
      out[rank].local_rank = l;
      out[rank].cross_rank = cross_count[l]++;
    }
    for (int r = first; r < rank; r++) out[r].local_size = rank - first;
  }
  for (int r = 0; r < np; r++) out[r].cross_size = cross_count[out[r].local_rank];
  free(cross_count);
  *slots = out;
  return HVDS_SUCCESS;
}

int hvds__host_is_local(const char* name) {
  if (strcmp(name, "localhost") == 0 || strcmp(name, "127.0.0.1") == 0 ||
      strcmp(name, "::1") == 0)
    return 1;
  char self[HVDS_HOST_NAME_MAX];
  if (gethostname(self, sizeof(self)) != 0) return 0;
  self[sizeof(self) - 1] = '\0';
  if (strcmp(name, self) == 0) return 1;
  // "node1" matches a fully qualified "node1.example.com" and vice versa.
  size_t n = strlen(name), s = strlen(self);
  if (n < s && self[n] == '.' && strncmp(self, name, n) == 0) return 1;
  if (s < n && name[s] == '.' && strncmp(self, name, s) == 0) return 1;
  return 0;
}
