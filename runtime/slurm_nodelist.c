/* Slurm host lists: entries separated by commas outside brackets; each entry is text with any
 * number of bracket groups of ranges ("[01-04,07]"), expanded as a cartesian product. */
#include "slurm_nodelist.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_GROUPS 8
#define MAX_RANGE 1000000L /* hosts one range may name; larger is taken as malformed */

typedef struct {
  const char* start; /* first character inside '[' */
  const char* end;   /* the closing ']' */
} group_t;

/* Where the entry starting at p ends: the next ',' outside brackets, or the terminating NUL.
 * NULL when brackets are unbalanced. */
static const char* entry_end(const char* p) {
  int depth = 0;
  for (; *p; p++) {
    if (*p == '[' && ++depth > 1) return NULL;
    if (*p == ']' && --depth < 0) return NULL;
    if (*p == ',' && depth == 0) break;
  }
  return depth == 0 ? p : NULL;
}

/* Parses one range "lo" or "lo-hi" at p; returns the character after it, or NULL. */
static const char* parse_range(const char* p, long* lo, long* hi, int* width) {
  if (!isdigit((unsigned char)*p)) return NULL;
  char* q;
  *lo = strtol(p, &q, 10);
  *width = (int)(q - p);
  *hi = *lo;
  if (*q == '-') {
    p = q + 1;
    if (!isdigit((unsigned char)*p)) return NULL;
    *hi = strtol(p, &q, 10);
  }
  if (*hi < *lo || *hi - *lo >= MAX_RANGE) return NULL;
  return q;
}

/* Hosts named by a bracket group, or -1 if malformed. */
static long group_count(group_t g) {
  long n = 0;
  for (const char* p = g.start; p < g.end;) {
    long lo, hi;
    int width;
    p = parse_range(p, &lo, &hi, &width);
    if (p == NULL || (*p != ',' && p != g.end) || n > MAX_RANGE) return -1;
    n += hi - lo + 1;
    if (*p == ',') p++;
  }
  return n > 0 ? n : -1;
}

/* The i-th number a (well-formed) group names, zero-padded to its range's first bound. */
static void group_nth(group_t g, long i, char* out, size_t len) {
  for (const char* p = g.start; p < g.end;) {
    long lo, hi;
    int width;
    p = parse_range(p, &lo, &hi, &width);
    if (i <= hi - lo) {
      snprintf(out, len, "%0*ld", width, lo + i);
      return;
    }
    i -= hi - lo + 1;
    if (*p == ',') p++;
  }
}

/* Appends n bytes of s to out (used so far: *used); -1 when it does not fit. */
static int append(char* out, size_t len, size_t* used, const char* s, size_t n) {
  if (*used + n + 1 > len) return -1;
  memcpy(out + *used, s, n);
  *used += n;
  out[*used] = '\0';
  return 0;
}

/* Writes the index-th host of the entry [p, end), whose groups and their counts are given. */
static int write_host(const char* p, const char* end, const group_t* groups, const long* counts,
                      int ng, long index, char* out, size_t len) {
  long digit[MAX_GROUPS];
  for (int k = ng - 1; k >= 0; k--) {  // the last group varies fastest
    digit[k] = index % counts[k];
    index /= counts[k];
  }
  size_t used = 0;
  const char* pos = p;
  for (int k = 0; k < ng; k++) {
    char num[32];
    group_nth(groups[k], digit[k], num, sizeof(num));
    if (append(out, len, &used, pos, (size_t)(groups[k].start - 1 - pos)) != 0 ||
        append(out, len, &used, num, strlen(num)) != 0)
      return -1;
    pos = groups[k].end + 1;
  }
  return append(out, len, &used, pos, (size_t)(end - pos));
}

/* Finds the bracket groups of the entry [p, end); returns their number, or -1. */
static int find_groups(const char* p, const char* end, group_t* groups) {
  int ng = 0;
  for (const char* c = p; c < end; c++) {
    if (*c != '[') continue;
    if (ng == MAX_GROUPS) return -1;
    groups[ng].start = c + 1;
    groups[ng].end = memchr(c, ']', (size_t)(end - c));
    c = groups[ng++].end;
  }
  return ng;
}

int hvds__slurm_nodelist_host(const char* list, int index, char* out, size_t len) {
  if (out == NULL || len == 0) return -1;
  out[0] = '\0';
  if (list == NULL || index < 0) return -1;
  long left = index;
  for (const char* p = list; *p;) {
    const char* end = entry_end(p);
    if (end == NULL || end == p) return -1;
    group_t groups[MAX_GROUPS];
    long counts[MAX_GROUPS];
    int ng = find_groups(p, end, groups);
    if (ng < 0) return -1;
    long total = 1;
    for (int k = 0; k < ng; k++) {
      counts[k] = group_count(groups[k]);
      if (counts[k] < 0 || total > INT_MAX / counts[k]) return -1;
      total *= counts[k];
    }
    if (left < total) {
      if (write_host(p, end, groups, counts, ng, left, out, len) == 0) return 0;
      out[0] = '\0';
      return -1;
    }
    left -= total;
    p = *end ? end + 1 : end;
  }
  return -1;
}
