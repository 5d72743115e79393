/* Flag parsing for `hvdsparse run`: launcher flags plus runtime knobs exported to workers. */
#include "run_args.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compat_flags.h"
#include "log.h"

typedef enum { K_STR, K_INT, K_NUM, K_MB, K_TRUE, K_FALSE, K_LOGLEVEL, K_BIND } knob_kind_t;

/* Flags that only set a runtime knob, as horovodrun's config_parser does. */
static const struct {
  const char* flag;
  const char* suffix;
  knob_kind_t kind;
} knob_flags[] = {
    {"--start-timeout", "START_TIMEOUT", K_NUM},
    {"--log-level", "LOG_LEVEL", K_LOGLEVEL},
    {"--log-without-timestamp", "LOG_HIDE_TIME", K_TRUE},
    {"--log-with-timestamp", "LOG_HIDE_TIME", K_FALSE},
    {"--log-hide-timestamp", "LOG_HIDE_TIME", K_TRUE},  // horovodrun's older names
    {"--no-log-hide-timestamp", "LOG_HIDE_TIME", K_FALSE},
    {"--timeline-filename", "TIMELINE", K_STR},
    {"--timeline-mark-cycles", "TIMELINE_MARK_CYCLES", K_TRUE},
    {"--no-timeline-mark-cycles", "TIMELINE_MARK_CYCLES", K_FALSE},
    {"--fusion-threshold-mb", "FUSION_THRESHOLD", K_MB},
    {"--cycle-time-ms", "CYCLE_TIME", K_NUM},
    {"--cache-capacity", "CACHE_CAPACITY", K_INT},
    {"--hierarchical-allreduce", "HIERARCHICAL_ALLREDUCE", K_TRUE},
    {"--no-hierarchical-allreduce", "HIERARCHICAL_ALLREDUCE", K_FALSE},
    {"--autotune", "AUTOTUNE", K_TRUE},
    {"--no-autotune", "AUTOTUNE", K_FALSE},
    {"--autotune-log-file", "AUTOTUNE_LOG", K_STR},
    {"--autotune-warmup-samples", "AUTOTUNE_WARMUP_SAMPLES", K_INT},
    {"--autotune-steps-per-sample", "AUTOTUNE_STEPS_PER_SAMPLE", K_INT},
    {"--autotune-bayes-opt-max-samples", "AUTOTUNE_BAYES_OPT_MAX_SAMPLES", K_INT},
    {"--autotune-gaussian-process-noise", "AUTOTUNE_GAUSSIAN_PROCESS_NOISE", K_NUM},
    {"--no-stall-check", "STALL_CHECK_DISABLE", K_TRUE},
    {"--stall-check", "STALL_CHECK_DISABLE", K_FALSE},
    {"--stall-check-warning-time-seconds", "STALL_CHECK_TIME_SECONDS", K_NUM},
    {"--stall-check-shutdown-time-seconds", "STALL_SHUTDOWN_TIME_SECONDS", K_NUM},
    {"--gloo-timeout-seconds", "GLOO_TIMEOUT_SECONDS", K_NUM},
    {"--bind-to", "BIND_TO", K_BIND},
};

hvds_result_t hvds__env_list_set(hvds_env_list_t* list, const char* name, const char* value) {
  char* n = strdup(name);
  char* v = value ? strdup(value) : NULL;
  if (n == NULL || (value && v == NULL)) goto oom;
  for (int i = 0; i < list->n; i++) {
    if (strcmp(list->items[i].name, name) == 0) {
      free(list->items[i].name);
      free(list->items[i].value);
      list->items[i].name = n;
      list->items[i].value = v;
      return HVDS_SUCCESS;
    }
  }
  if (list->n == list->cap) {
    int cap = list->cap ? list->cap * 2 : 16;
    hvds_env_kv_t* items = realloc(list->items, (size_t)cap * sizeof(*items));
    if (items == NULL) goto oom;
    list->items = items;
    list->cap = cap;
  }
  list->items[list->n].name = n;
  list->items[list->n].value = v;
  list->n++;
  return HVDS_SUCCESS;
oom:
  free(n);
  free(v);
  return HVDS_SYSTEM_ERROR;
}

const char* hvds__env_list_get(const hvds_env_list_t* list, const char* name) {
  for (int i = 0; i < list->n; i++)
    if (strcmp(list->items[i].name, name) == 0) return list->items[i].value;
  return NULL;
}

void hvds__env_list_free(hvds_env_list_t* list) {
  if (list == NULL) return;
  for (int i = 0; i < list->n; i++) {
    free(list->items[i].name);
    free(list->items[i].value);
  }
  free(list->items);
  list->items = NULL;
  list->n = list->cap = 0;
}

static int parse_double(const char* s, double* out) {
  char* end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0' || !isfinite(v) || v < 0) return -1;
  *out = v;
  return 0;
}

static int parse_int(const char* s, long long* out) {
  char* end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < 0) return -1;
  *out = v;
  return 0;
}

/* Turns a knob flag's text into the value exported to workers. */
static hvds_result_t knob_value(knob_kind_t kind, const char* text, char* buf, size_t buflen) {
  double d;
  long long i;
  switch (kind) {
    case K_TRUE:
      snprintf(buf, buflen, "1");
      return HVDS_SUCCESS;
    case K_FALSE:
      snprintf(buf, buflen, "0");
      return HVDS_SUCCESS;
    case K_STR:
      snprintf(buf, buflen, "%s", text);
      return HVDS_SUCCESS;
    case K_INT:
      if (parse_int(text, &i) != 0) return HVDS_INVALID_ARGUMENT;
      snprintf(buf, buflen, "%lld", i);
      return HVDS_SUCCESS;
    case K_NUM:
      if (parse_double(text, &d) != 0) return HVDS_INVALID_ARGUMENT;
      snprintf(buf, buflen, "%s", text);
      return HVDS_SUCCESS;
    case K_MB:
      if (parse_double(text, &d) != 0 || d > 1e12) return HVDS_INVALID_ARGUMENT;
      snprintf(buf, buflen, "%lld", (long long)llround(d * 1048576.0));
      return HVDS_SUCCESS;
    case K_LOGLEVEL:
      if (hvds__log_parse_level(text) < 0) return HVDS_INVALID_ARGUMENT;
      snprintf(buf, buflen, "%s", text);
      return HVDS_SUCCESS;
    case K_BIND:  // docs/hierarchy.md
      if (strcmp(text, "core") != 0 && strcmp(text, "numa") != 0 && strcmp(text, "none") != 0 &&
          strcmp(text, "auto") != 0)
        return HVDS_INVALID_ARGUMENT;
      snprintf(buf, buflen, "%s", text);
      return HVDS_SUCCESS;
  }
  return HVDS_INVALID_ARGUMENT;
}

static int takes_value(knob_kind_t kind) { return kind != K_TRUE && kind != K_FALSE; }

/* Matches word against flag, alone or as "flag=value" (then *inline_value is set). */
static int flag_is(const char* word, const char* flag, const char** inline_value) {
  size_t n = strlen(flag);
  if (strncmp(word, flag, n) != 0) return 0;
  if (word[n] == '\0') return 1;
  if (word[n] == '=' && inline_value) {
    *inline_value = word + n + 1;
    return 1;
  }
  return 0;
}

typedef struct {
  int argc;
  char** argv;
  int i;                    /* index of the current word */
  const char* inline_value; /* value given as --flag=value */
  char* err;
  size_t errlen;
} cursor_t;

/* The current flag's value: the inline one, else the next word. */
static const char* value_of(cursor_t* c) {
  if (c->inline_value) return c->inline_value;
  if (c->i + 1 >= c->argc) {
    snprintf(c->err, c->errlen, "flag %s needs a value", c->argv[c->i]);
    return NULL;
  }
  return c->argv[++c->i];
}

static hvds_result_t set_knob(hvds_run_args_t* a, const char* suffix, const char* value) {
  return hvds__env_list_set(&a->knobs, suffix, value);
}

/* 1 when the command line set the knob suffix (a config file then leaves it alone). */
static int set_on_command_line(const hvds_run_args_t* a, const char* suffix) {
  for (int i = 0; i < a->cli_knobs && i < a->knobs.n; i++)
    if (strcmp(a->knobs.items[i].name, suffix) == 0) return 1;
  return 0;
}

/* Handles the knob flags; returns 1 when the word was one (rc set), 0 otherwise. */
static int parse_knob_flag(cursor_t* c, hvds_run_args_t* a, hvds_result_t* rc) {
  const char* word = c->argv[c->i];
  for (size_t k = 0; k < sizeof(knob_flags) / sizeof(knob_flags[0]); k++) {
    c->inline_value = NULL;
    int with_value = takes_value(knob_flags[k].kind);
    if (!flag_is(word, knob_flags[k].flag, with_value ? &c->inline_value : NULL)) continue;
    const char* text = with_value ? value_of(c) : "";
    if (text == NULL) {
      *rc = HVDS_INVALID_ARGUMENT;
      return 1;
    }
    char buf[4096];
    if (knob_value(knob_flags[k].kind, text, buf, sizeof(buf)) != HVDS_SUCCESS) {
      snprintf(c->err, c->errlen, "invalid value '%s' for %s", text, knob_flags[k].flag);
      *rc = HVDS_INVALID_ARGUMENT;
      return 1;
    }
    *rc = HVDS_SUCCESS;
    if (set_on_command_line(a, knob_flags[k].suffix)) return 1;  // a config file's setting
    if (strcmp(knob_flags[k].suffix, "START_TIMEOUT") == 0) a->start_timeout = strtod(buf, NULL);
    *rc = set_knob(a, knob_flags[k].suffix, buf);
    return 1;
  }
  return 0;
}

static hvds_result_t parse_x(cursor_t* c, hvds_run_args_t* a) {
  const char* v = value_of(c);
  if (v == NULL) return HVDS_INVALID_ARGUMENT;
  const char* eq = strchr(v, '=');
  size_t name_len = eq ? (size_t)(eq - v) : strlen(v);
  if (name_len == 0 || name_len > 255) {
    snprintf(c->err, c->errlen, "invalid -x argument '%s'", v);
    return HVDS_INVALID_ARGUMENT;
  }
  char name[256];
  memcpy(name, v, name_len);
  name[name_len] = '\0';
  return hvds__env_list_set(&a->xvars, name, eq ? eq + 1 : NULL);
}

/* Adds the comma-separated interfaces in list to a->network_interfaces, skipping repeats (the
 * union of every --network-interfaces and --network-interface, as horovodrun). The first one
 * carries the data plane (HVDSPARSE_GLOO_IFACE). */
static hvds_result_t add_interfaces(hvds_run_args_t* a, const char* list) {
  for (const char* p = list; *p;) {
    size_t n = strcspn(p, ",");
    const char* have = a->network_interfaces ? a->network_interfaces : "";
    int seen = 0;
    for (const char* q = have; *q && !seen; q += strcspn(q, ","), q += *q == ',')
      seen = strcspn(q, ",") == n && strncmp(q, p, n) == 0;
    if (n > 0 && !seen) {
      size_t old = strlen(have);
      char* joined = malloc(old + n + 2);
      if (joined == NULL) return HVDS_SYSTEM_ERROR;
      snprintf(joined, old + n + 2, "%s%s%.*s", have, old ? "," : "", (int)n, p);
      free(a->network_interfaces);
      a->network_interfaces = joined;
    }
    p += n + (p[n] == ',');
  }
  if (a->network_interfaces == NULL) return HVDS_SUCCESS;
  char first[256];
  snprintf(first, sizeof(first), "%.*s", (int)strcspn(a->network_interfaces, ","),
           a->network_interfaces);
  return set_knob(a, "GLOO_IFACE", first);
}

/* Steps over the values of a flag that takes nvalues words (one may be inline). */
static hvds_result_t skip_values(cursor_t* c, int nvalues) {
  for (int k = 0; k < nvalues; k++) {
    if (k == 0 && c->inline_value) continue;
    if (c->i + 1 >= c->argc) {
      snprintf(c->err, c->errlen, "flag %s needs %d value%s", c->argv[c->i - k], nvalues,
               nvalues == 1 ? "" : "s");
      return HVDS_INVALID_ARGUMENT;
    }
    c->i++;
  }
  return HVDS_SUCCESS;
}

/* horovodrun's flags without a counterpart (compat_flags.h): the ones that would change nothing
 * are recorded with their warning, the elastic ones refused. HVDS_NOT_SUPPORTED for a word that
 * is no flag of either kind. */
static hvds_result_t parse_compat_flag(cursor_t* c, hvds_run_args_t* a) {
  const char* w = c->argv[c->i];
  for (int k = 0; k < hvds__no_effect_flag_count; k++) {
    const hvds_compat_flag_t* f = &hvds__no_effect_flags[k];
    c->inline_value = NULL;
    if (!flag_is(w, f->flag, f->nvalues ? &c->inline_value : NULL)) continue;
    hvds_result_t rc = skip_values(c, f->nvalues);
    return rc == HVDS_SUCCESS ? hvds__env_list_set(&a->warnings, f->flag, f->why) : rc;
  }
  return HVDS_NOT_SUPPORTED;
}

/* A count flag's value: a positive int (0 allowed when zero_ok). */
static hvds_result_t count_value(cursor_t* c, const char* flag, int zero_ok, int* out) {
  const char* v = value_of(c);
  long long n;
  if (v == NULL) return HVDS_INVALID_ARGUMENT;
  if (parse_int(v, &n) != 0 || n > 1000000 || (n == 0 && !zero_ok)) {
    snprintf(c->err, c->errlen, "invalid %s '%s'", flag, v);
    return HVDS_INVALID_ARGUMENT;
  }
  *out = (int)n;
  return HVDS_SUCCESS;
}

/* The elastic flags; HVDS_NOT_SUPPORTED when the word is none of them. */
static hvds_result_t parse_elastic_flag(cursor_t* c, hvds_run_args_t* a) {
  const char* w = c->argv[c->i];
  c->inline_value = NULL;
  if (flag_is(w, "--min-np", &c->inline_value) || flag_is(w, "--min-num-proc", &c->inline_value)) {
    a->elastic = 1;
    return count_value(c, "--min-np", 0, &a->min_np);
  }
  if (flag_is(w, "--max-np", &c->inline_value) || flag_is(w, "--max-num-proc", &c->inline_value))
    return count_value(c, "--max-np", 0, &a->max_np);
  if (flag_is(w, "--slots-per-host", &c->inline_value))
    return count_value(c, "--slots-per-host", 0, &a->slots_per_host);
  if (flag_is(w, "--reset-limit", &c->inline_value))
    return count_value(c, "--reset-limit", 1, &a->reset_limit);
  if (flag_is(w, "--host-discovery-script", &c->inline_value)) {
    a->elastic = 1;
    return (a->discovery_script = value_of(c)) ? HVDS_SUCCESS : HVDS_INVALID_ARGUMENT;
  }
  if (flag_is(w, "--blacklist-cooldown-range", &c->inline_value)) {
    // Horovod's bounds: at least 1 s, at most an hour.
    if (count_value(c, "--blacklist-cooldown-range", 0, &a->cooldown_min) != HVDS_SUCCESS)
      return HVDS_INVALID_ARGUMENT;
    c->inline_value = NULL;
    if (count_value(c, "--blacklist-cooldown-range", 0, &a->cooldown_max) != HVDS_SUCCESS)
      return HVDS_INVALID_ARGUMENT;
    if (a->cooldown_min < 1 || a->cooldown_max > 3600 || a->cooldown_min > a->cooldown_max) {
      snprintf(c->err, c->errlen,
               "invalid --blacklist-cooldown-range %d %d: MIN and MAX are "
               "seconds, 1 <= MIN <= MAX <= 3600",
               a->cooldown_min, a->cooldown_max);
      return HVDS_INVALID_ARGUMENT;
    }
    return HVDS_SUCCESS;
  }
  if (flag_is(w, "--blacklist-scope", &c->inline_value)) {
    const char* v = value_of(c);
    if (v == NULL) return HVDS_INVALID_ARGUMENT;
    if (strcmp(v, "host") != 0 && strcmp(v, "slot") != 0) {
      snprintf(c->err, c->errlen, "invalid --blacklist-scope '%s': host or slot", v);
      return HVDS_INVALID_ARGUMENT;
    }
    a->blacklist_slots = strcmp(v, "slot") == 0;
    return HVDS_SUCCESS;
  }
  if (flag_is(w, "--elastic-timeout", &c->inline_value)) {
    const char* v = value_of(c);
    if (v == NULL) return HVDS_INVALID_ARGUMENT;
    if (parse_double(v, &a->elastic_timeout) != 0) {
      snprintf(c->err, c->errlen, "invalid --elastic-timeout '%s'", v);
      return HVDS_INVALID_ARGUMENT;
    }
    return HVDS_SUCCESS;
  }
  return HVDS_NOT_SUPPORTED;
}

/* Handles one launcher flag at c->i; HVDS_NOT_SUPPORTED when the word is no known flag. */
static hvds_result_t parse_flag(cursor_t* c, hvds_run_args_t* a) {
  const char* w = c->argv[c->i];
  const char* v;
  long long n;
  c->inline_value = NULL;
#define VALUE_FLAG(f1, f2) \
  (flag_is(w, f1, &c->inline_value) || (f2 != NULL && flag_is(w, f2, &c->inline_value)))
#define NEED(v)                                      \
  do {                                               \
    if (((v) = value_of(c)) == NULL) return HVDS_INVALID_ARGUMENT; \
  } while (0)
  if (VALUE_FLAG("-np", "--num-proc")) {
    NEED(v);
    if (parse_int(v, &n) != 0 || n <= 0 || n > 1000000) {
      snprintf(c->err, c->errlen, "invalid -np '%s'", v);
      return HVDS_INVALID_ARGUMENT;
    }
    a->np = (int)n;
  } else if (VALUE_FLAG("-H", "--hosts")) {
    NEED(a->hosts);
  } else if (VALUE_FLAG("-hostfile", "--hostfile")) {
    NEED(a->hostfile);
  } else if (VALUE_FLAG("-p", "--ssh-port")) {
    NEED(v);
    if (parse_int(v, &n) != 0 || n <= 0 || n > 65535) {
      snprintf(c->err, c->errlen, "invalid ssh port '%s'", v);
      return HVDS_INVALID_ARGUMENT;
    }
    a->ssh_port = (int)n;
  } else if (VALUE_FLAG("-i", "--ssh-identity-file")) {
    NEED(a->ssh_identity);
  } else if (VALUE_FLAG("--output-filename", NULL)) {
    NEED(a->output_filename);
  } else if (VALUE_FLAG("--rsh", NULL)) {
    NEED(a->rsh);
  } else if (VALUE_FLAG("--rendezvous-addr", NULL)) {
    NEED(a->rendezvous_addr);
  } else if (VALUE_FLAG("--network-interfaces", "--network-interface")) {
    NEED(v);
    return add_interfaces(a, v);
  } else if (VALUE_FLAG("--config-file", NULL)) {
    NEED(a->config_file);
  } else if (VALUE_FLAG("-x", NULL)) {
    return parse_x(c, a);
  } else if (flag_is(w, "--verbose", NULL)) {
    a->verbose = 1;
  } else if (flag_is(w, "--horovod-alias", NULL)) {
    a->horovod_alias = 1;
  } else if (flag_is(w, "--keep-freed-memory", NULL)) {
    a->keep_freed_memory = 1;
  } else if (flag_is(w, "-prefix-timestamp", NULL) ||
             flag_is(w, "--prefix-output-with-timestamp", NULL)) {
    a->prefix_timestamp = 1;
  } else if (flag_is(w, "-cb", NULL) || flag_is(w, "--check-build", NULL)) {
    a->check_build = 1;
  } else if (flag_is(w, "-h", NULL) || flag_is(w, "--help", NULL)) {
    a->help = 1;
  } else if (flag_is(w, "-v", NULL) || flag_is(w, "--version", NULL)) {
    a->version = 1;
  } else {
    hvds_result_t rc = parse_elastic_flag(c, a);
    return rc == HVDS_NOT_SUPPORTED ? parse_compat_flag(c, a) : rc;
  }
#undef VALUE_FLAG
#undef NEED
  return HVDS_SUCCESS;
}

/* One flag at c->i: a knob, a launcher flag or a horovodrun flag without effect. */
static hvds_result_t parse_one(cursor_t* c, hvds_run_args_t* a) {
  hvds_result_t rc = HVDS_SUCCESS;
  if (parse_knob_flag(c, a, &rc)) return rc;
  rc = parse_flag(c, a);
  if (rc == HVDS_NOT_SUPPORTED) {
    snprintf(c->err, c->errlen, "unknown flag %s (see hvdsparse run --help)", c->argv[c->i]);
    rc = HVDS_INVALID_ARGUMENT;
  }
  return rc;
}

hvds_result_t hvds__run_args_apply_setting(hvds_run_args_t* a, const char* flag, const char* value,
                                           char* err, size_t errlen) {
  char* words[2] = {(char*)flag, (char*)value};
  cursor_t c = {value ? 2 : 1, words, 0, NULL, err, errlen};
  return parse_one(&c, a);
}

hvds_result_t hvds__run_args_check_complete(const hvds_run_args_t* a, char* err, size_t errlen) {
  if (a->help || a->version || a->check_build) return HVDS_SUCCESS;
  if (a->ncommand == 0) {
    snprintf(err, errlen, "no command given (usage: hvdsparse run -np N command ...)");
  } else if (a->hosts && a->hostfile) {
    snprintf(err, errlen, "-H and --hostfile are mutually exclusive");
  } else if (a->np == 0 && !a->hosts && !a->hostfile && !a->elastic) {
    snprintf(err, errlen, "-np is required");
  } else if (a->elastic && a->np == 0 && a->min_np == 0) {
    snprintf(err, errlen, "an elastic job needs -np or --min-np");
  } else if (a->elastic && a->max_np > 0 && a->max_np < (a->min_np > 0 ? a->min_np : a->np)) {
    snprintf(err, errlen, "--max-np %d is below --min-np (or -np)", a->max_np);
  } else if (!a->elastic && (a->max_np || a->slots_per_host || a->reset_limit ||
                             a->elastic_timeout >= 0 || a->cooldown_max || a->blacklist_slots)) {
    snprintf(err, errlen,
             "--max-np, --slots-per-host, --elastic-timeout, --reset-limit, "
             "--blacklist-cooldown-range and --blacklist-scope need an elastic job (--min-np or "
             "--host-discovery-script)");
  } else {
    return HVDS_SUCCESS;
  }
  return HVDS_INVALID_ARGUMENT;
}

hvds_result_t hvds__run_args_parse_flags(int argc, char** argv, hvds_run_args_t* out, char* err,
                                         size_t errlen) {
  memset(out, 0, sizeof(*out));
  out->start_timeout = -1;
  out->elastic_timeout = -1;
  cursor_t c = {argc, argv, 0, NULL, err, errlen};
  hvds_result_t rc = HVDS_SUCCESS;
  for (; c.i < argc && rc == HVDS_SUCCESS; c.i++) {
    const char* w = argv[c.i];
    if (strcmp(w, "--") == 0) {
      c.i++;
      break;
    }
    if (w[0] != '-' || w[1] == '\0') break;  // first non-flag word: the command starts
    rc = parse_one(&c, out);
  }
  out->command = argv + c.i;
  out->ncommand = argc - c.i;
  out->cli_knobs = out->knobs.n;
  if (rc != HVDS_SUCCESS) hvds__run_args_free(out);
  return rc;
}

void hvds__run_args_print_warnings(const hvds_run_args_t* args, FILE* f) {
  for (int i = 0; i < args->warnings.n; i++)
    fprintf(f, "hvdsparse: warning: %s has no effect: %s\n", args->warnings.items[i].name,
            args->warnings.items[i].value);
}

void hvds__run_args_free(hvds_run_args_t* args) {
  if (args == NULL) return;
  hvds__env_list_free(&args->knobs);
  hvds__env_list_free(&args->xvars);
  hvds__env_list_free(&args->warnings);
  free(args->network_interfaces);
  args->network_interfaces = NULL;
}

void hvds__run_args_usage(FILE* f) {
  fputs(
      "usage: hvdsparse run -np N [-H host1:2,host2:2 | --hostfile FILE] [flags] command ...\n"
      "\n"
      "Launcher flags:\n"
      "  -np, --num-proc N               number of worker processes\n"
      "  -H, --hosts LIST                host1:slots,host2:slots (default localhost:N)\n"
      "  --hostfile FILE                 lines of 'host slots=N'\n"
      "  -p, --ssh-port PORT             ssh port of remote hosts\n"
      "  -i, --ssh-identity-file FILE    ssh identity of remote hosts\n"
      "  --rsh CMD                       agent for remote hosts instead of ssh, e.g. 'ip netns "
      "exec'\n"
      "  --start-timeout S               seconds for every rank to reach rendezvous (default 30)\n"
      "  --network-interfaces A,B        interfaces for the data plane; A also serves rendezvous\n"
      "  --network-interface A           the same, one interface a time (repeatable)\n"
      "  --rendezvous-addr ADDR          address the rendezvous store listens on\n"
      "  --output-filename DIR           also write DIR/rank.N/stdout and stderr\n"
      "  -prefix-timestamp, --prefix-output-with-timestamp   time of day before every line\n"
      "  -x VAR[=VALUE]                  forward (or set) an environment variable\n"
      "  --config-file FILE              horovodrun's YAML settings (flags given here win)\n"
      "  --verbose                       print the host assignment and rendezvous progress\n"
      "  --horovod-alias                 make 'import horovod.*' load hvdsparse\n"
      "  --keep-freed-memory             workers' malloc reuses freed memory (no per-step faults)\n"
      "  -cb, --check-build              list what this build supports, then exit\n"
      "  -h, --help / -v, --version\n"
      "\n"
      "Runtime knobs (exported as HVDSPARSE_* and HOROVOD_*):\n"
      "  --fusion-threshold-mb N, --cycle-time-ms F, --cache-capacity N, --autotune,\n"
      "  --autotune-log-file F, --autotune-warmup-samples N, --autotune-steps-per-sample N,\n"
      "  --autotune-bayes-opt-max-samples N, --autotune-gaussian-process-noise F,\n"
      "  --hierarchical-allreduce, --no-hierarchical-allreduce, --timeline-filename F,\n"
      "  --timeline-mark-cycles, --no-stall-check, --stall-check-warning-time-seconds S,\n"
      "  --stall-check-shutdown-time-seconds S, --gloo-timeout-seconds S, --log-level L,\n"
      "  --log-without-timestamp, --bind-to auto|core|numa|none (each worker to its share of\n"
      "  the host; auto, the default: core when the local ranks spread evenly over the cores)\n"
      "\n"
      "horovodrun flags accepted with a warning, as they have no effect here: --mpi, --gloo,\n"
      "  --jsrun, --tcp, --num-nccl-streams N, --thread-affinity N, --mpi-threads-disable,\n"
      "  --mpi-args ARGS, --binding-args ARGS, --hierarchical-allgather, --disable-cache.\n"
      "\n"
      "Elastic training (either of the first two makes the job elastic):\n"
      "  --min-np N                      the job goes on while N workers are left\n"
      "  --host-discovery-script FILE    prints the usable hosts, one 'host:slots' a line\n"
      "  --max-np N                      never more workers than N\n"
      "  --slots-per-host N              slots of a host the script names without a count\n"
      "  --elastic-timeout S             end the job when below --min-np this long (600)\n"
      "  --reset-limit N                 end the job rather than change membership N+1 times\n"
      "  --blacklist-cooldown-range MIN MAX  a failed host may be used again after a cool-down\n"
      "                                  of MIN*2^failures s (+ up to MIN), at most MAX s\n"
      "  --blacklist-scope host|slot     a worker's failure takes its whole host out of the\n"
      "                                  job, as Horovod does (host, the default), or its slot\n",
      f);
}
