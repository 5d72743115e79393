/* Cores this process can keep busy (cpu_budget.h).
 *
 * The cgroup of the process is found the way the kernel describes it: /proc/self/cgroup names
 * its path in each hierarchy (v2: "0::/path"; v1: "4:cpu,cpuacct:/path"), and
 * /proc/self/mountinfo says where each hierarchy is mounted and which of its directories the
 * mount shows (a container usually sees its own cgroup as the mount's root). The quota files
 * are read from the process's directory up to the mount point, since a parent's limit binds its
 * children too. */
#define _GNU_SOURCE
#include "cpu_budget.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PATH_BYTES 4096

/* 1 when the comma-separated list holds the token word. */
static int has_token(const char* list, size_t len, const char* word) {
  size_t w = strlen(word);
  const char* end = list + len;
  for (const char* s = list; s < end;) {
    const char* comma = memchr(s, ',', (size_t)(end - s));
    size_t n = comma ? (size_t)(comma - s) : (size_t)(end - s);
    if (n == w && strncmp(s, word, w) == 0) return 1;
    s += n + 1;
  }
  return 0;
}

/* The path of this process's cgroup in the v2 hierarchy (v2 = 1) or in the v1 hierarchy that
 * holds the cpu controller, copied to out; 0 when /proc/self/cgroup lists none. */
static int cgroup_path(const char* cgroup, int v2, char* out, size_t cap) {
  for (const char* line = cgroup; line && *line;) {
    const char* eol = strchr(line, '\n');
    size_t len = eol ? (size_t)(eol - line) : strlen(line);
    const char* c1 = memchr(line, ':', len);
    const char* c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;
    if (c2 != NULL) {
      size_t ctl = (size_t)(c2 - c1 - 1), plen = len - (size_t)(c2 + 1 - line);
      int match =
          v2 ? (c1 - line == 1 && line[0] == '0' && ctl == 0) : has_token(c1 + 1, ctl, "cpu");
      if (match && plen < cap) {
        memcpy(out, c2 + 1, plen);
        out[plen] = '\0';
        return 1;
      }
    }
    line = eol ? eol + 1 : NULL;
  }
  return 0;
}

/* dir/name opened for reading; NULL when missing or when the path does not fit. */
static FILE* open_in(const char* dir, const char* name) {
  char path[PATH_BYTES];
  size_t d = strlen(dir), n = strlen(name);
  if (d + 1 + n >= sizeof path) return NULL;
  memcpy(path, dir, d);
  path[d] = '/';
  memcpy(path + d + 1, name, n + 1);
  return fopen(path, "r");
}

/* The quota in CPUs written in the cgroup directory dir; 0 when there is none. */
static double quota_at(const char* dir, int v2) {
  long long q = -1, period = 0;
  FILE* f = open_in(dir, v2 ? "cpu.max" : "cpu.cfs_quota_us");
  if (f == NULL) return 0;
  if (v2) {  // "max 100000" (no limit) or "150000 100000"
    char first[32] = {0};
    if (fscanf(f, "%31s %lld", first, &period) == 2 && strcmp(first, "max") != 0)
      q = strtoll(first, NULL, 10);
  } else if (fscanf(f, "%lld", &q) != 1) {  // -1: no limit
    q = -1;
  }
  fclose(f);
  if (!v2 && q > 0 && (f = open_in(dir, "cpu.cfs_period_us")) != NULL) {
    if (fscanf(f, "%lld", &period) != 1) period = 0;
    fclose(f);
  }
  return q > 0 && period > 0 ? (double)q / (double)period : 0;
}

/* The smallest quota from dir up to top (a prefix of dir); 0 when none is set. */
static double smallest_quota(char* dir, size_t top, int v2) {
  double best = 0;
  for (;;) {
    double q = quota_at(dir, v2);
    if (q > 0 && (best == 0 || q < best)) best = q;
    char* slash = strrchr(dir, '/');
    if (strlen(dir) <= top || slash == NULL || (size_t)(slash - dir) < top) return best;
    *slash = '\0';
  }
}

/* The quota of the hierarchy mounted by one mountinfo line (v2, or v1 with the cpu controller);
 * 0 when the line is another file system or no quota is set. */
static double mount_quota(const char* line, size_t len, const char* cgroup, const char* root) {
  char buf[PATH_BYTES], mroot[PATH_BYTES], point[PATH_BYTES], fstype[64], super[512];
  if (len >= sizeof buf) return 0;
  memcpy(buf, line, len);
  buf[len] = '\0';
  const char* dash = strstr(buf, " - ");
  if (dash == NULL || sscanf(buf, "%*s %*s %*s %4095s %4095s", mroot, point) != 2 ||
      sscanf(dash + 3, "%63s %*s %511s", fstype, super) != 2)
    return 0;
  int v2 = strcmp(fstype, "cgroup2") == 0;
  if (!v2 && (strcmp(fstype, "cgroup") != 0 || !has_token(super, strlen(super), "cpu"))) return 0;
  char path[PATH_BYTES];
  if (!cgroup_path(cgroup, v2, path, sizeof path)) return 0;
  // The process's directory relative to what the mount shows; outside it, the mount point.
  size_t rl = strcmp(mroot, "/") == 0 ? 0 : strlen(mroot);
  const char* rel =
      strncmp(path, mroot, rl) == 0 && (path[rl] == '/' || path[rl] == '\0') ? path + rl : "";
  if (strcmp(rel, "/") == 0) rel = "";
  char dir[PATH_BYTES];
  int top = snprintf(dir, sizeof dir, "%s%s", root, point);
  if (top < 0 || (size_t)top >= sizeof dir) return 0;
  if ((size_t)snprintf(dir + top, sizeof dir - (size_t)top, "%s", rel) >= sizeof dir - (size_t)top)
    return 0;
  return smallest_quota(dir, (size_t)top, v2);
}

hvds_cpu_budget_t hvds__cpu_budget_from(int cpus, const char* cgroup, const char* mountinfo,
                                        const char* root) {
  hvds_cpu_budget_t b = {cpus > 0 ? cpus : 1, cpus > 0 ? cpus : 1, 0};
  for (const char* line = mountinfo; line && *line && cgroup;) {
    const char* eol = strchr(line, '\n');
    size_t len = eol ? (size_t)(eol - line) : strlen(line);
    double q = mount_quota(line, len, cgroup, root);
    if (q > 0 && (b.quota == 0 || q < b.quota)) b.quota = q;
    line = eol ? eol + 1 : NULL;
  }
  if (b.quota > 0) {  // a quota of 1.5 CPUs keeps 2 cores busy part of the time
    int up = (int)b.quota;
    if (up < b.quota - 1e-9) up++;
    if (up < b.cores) b.cores = up < 1 ? 1 : up;
  }
  return b;
}

/* The whole of a small /proc file (NULL when unreadable); the caller frees it. */
static char* read_text(const char* path) {
  FILE* f = fopen(path, "r");
  if (f == NULL) return NULL;
  size_t cap = 4096, len = 0;
  char* s = malloc(cap);
  while (s != NULL) {
    len += fread(s + len, 1, cap - len - 1, f);
    if (len < cap - 1) break;
    char* grown = realloc(s, cap * 2);
    if (grown == NULL) {
      free(s);
      s = NULL;
      break;
    }
    s = grown;
    cap *= 2;
  }
  fclose(f);
  if (s != NULL) s[len] = '\0';
  return s;
}

static int affinity_cpus(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

static pthread_once_t budget_once = PTHREAD_ONCE_INIT;
static hvds_cpu_budget_t budget;

static void read_budget(void) {
  char* cgroup = read_text("/proc/self/cgroup");
  char* mountinfo = read_text("/proc/self/mountinfo");
  budget = hvds__cpu_budget_from(affinity_cpus(), cgroup, mountinfo, "");
  free(cgroup);
  free(mountinfo);
}

hvds_cpu_budget_t hvds__cpu_budget(void) {
  pthread_once(&budget_once, read_budget);
  return budget;
}
