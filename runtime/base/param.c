/* Knob table: values come from HVDSPARSE_<name>, then HOROVOD_<name>, then the default. */
#include "param.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef enum { TYPE_INT, TYPE_DBL, TYPE_STR } param_type_t;

typedef struct {
  const char* suffix;
  param_type_t type;
  const char* def; /* default as text; NULL for none */
} param_decl_t;

#define INT TYPE_INT
#define DBL TYPE_DBL
#define STR TYPE_STR
#define DEF_TEXT(def) ((const char*)_Generic((def), char*: (def), void*: NULL, default: #def))
static const param_decl_t decls[HVDS_PARAM_COUNT] = {
#define X(id, suffix, type, def, doc) {suffix, type, DEF_TEXT(def)},
#include "params.def"
#undef X
};
#undef INT
#undef DBL
#undef STR

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int loaded;
static char* values[HVDS_PARAM_COUNT]; /* owned copies; NULL = unset with no default */
static int explicit_set[HVDS_PARAM_COUNT];
static char** retired; /* overridden values (hvds__param_set_str), never freed */
static size_t nretired;

static char* lookup(const char* suffix, int* found) {
  static const char* const prefixes[] = {"HVDSPARSE_", "HOROVOD_"};
  char name[128];
  for (int i = 0; i < 2; i++) {
    snprintf(name, sizeof(name), "%s%s", prefixes[i], suffix);
    const char* v = getenv(name);
    if (v != NULL && v[0] != '\0') {
      *found = 1;
      return strdup(v);
    }
  }
  *found = 0;
  return NULL;
}

static void load_locked(void) {
  for (int i = 0; i < HVDS_PARAM_COUNT; i++) {
    free(values[i]);
    values[i] = lookup(decls[i].suffix, &explicit_set[i]);
    if (values[i] == NULL && decls[i].def != NULL) values[i] = strdup(decls[i].def);
  }
  loaded = 1;
}

static const char* get(hvds_param_id_t id) {
  pthread_mutex_lock(&mu);
  if (!loaded) load_locked();
  const char* v = values[id];
  pthread_mutex_unlock(&mu);
  return v;
}

void hvds__param_reload(void) {
  pthread_mutex_lock(&mu);
  load_locked();
  pthread_mutex_unlock(&mu);
}

long long hvds__param_int(hvds_param_id_t id) {
  const char* v = get(id);
  return v ? strtoll(v, NULL, 10) : 0;
}

double hvds__param_dbl(hvds_param_id_t id) {
  const char* v = get(id);
  return v ? strtod(v, NULL) : 0.0;
}

const char* hvds__param_str(hvds_param_id_t id) { return get(id); }

int hvds__param_is_set(hvds_param_id_t id) {
  get(id);
  return explicit_set[id];
}

void hvds__param_set_str(hvds_param_id_t id, const char* s) {
  pthread_mutex_lock(&mu);
  if (!loaded) load_locked();
  /* Readers may still hold the old string: it is kept, reachable, until the process ends.
   * Overrides are rare (tests); if the list cannot grow the string is let go the same way. */
  if (values[id] != NULL) {
    char** r = realloc(retired, (nretired + 1) * sizeof(*r));
    if (r != NULL) {
      retired = r;
      retired[nretired++] = values[id];
    }
  }
  values[id] = s ? strdup(s) : NULL;
  pthread_mutex_unlock(&mu);
}

const char* hvds__param_name(hvds_param_id_t id) { return decls[id].suffix; }

typedef struct {
  const char* suffix;
  const char* harmless; /* the value hvdsparse already behaves as; NULL for none */
  const char* why;
} ignored_knob_t;

static const ignored_knob_t ignored[] = {
#define X(suffix, value, why) {suffix, value, why},
#include "ignored_knobs.def"
#undef X
};

int hvds__param_report_ignored(hvds_param_ignored_fn report) {
  int count = 0;
  for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++) {
    char name[128];
    snprintf(name, sizeof(name), "HOROVOD_%s", ignored[i].suffix);
    const char* v = getenv(name);
    if (v == NULL || v[0] == '\0') continue;
    if (ignored[i].harmless != NULL && strcasecmp(v, ignored[i].harmless) == 0) continue;
    count++;
    if (report != NULL) report(name, v, ignored[i].why);
  }
  return count;
}
