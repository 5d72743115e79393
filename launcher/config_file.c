/* horovodrun's config file keys, mapped to the flags they stand for. */
#include "config_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "compat_flags.h"
#include "yaml_map.h"

/* One key: a value flag (if_false NULL) or a boolean choosing between two flags. */
static const struct {
  const char* section;
  const char* key;
  const char* flag;     /* the value flag, or the flag for true */
  const char* if_false; /* the flag for false; NULL for a value flag */
} settings[] = {
    {"params", "fusion_threshold_mb", "--fusion-threshold-mb", NULL},
    {"params", "cycle_time_ms", "--cycle-time-ms", NULL},
    {"params", "cache_capacity", "--cache-capacity", NULL},
    {"params", "hierarchical_allreduce", "--hierarchical-allreduce", "--no-hierarchical-allreduce"},
    {"params", "hierarchical_allgather", "--hierarchical-allgather", "--no-hierarchical-allgather"},
    {"autotune", "enabled", "--autotune", "--no-autotune"},
    {"autotune", "log_file", "--autotune-log-file", NULL},
    {"autotune", "warmup_samples", "--autotune-warmup-samples", NULL},
    {"autotune", "steps_per_sample", "--autotune-steps-per-sample", NULL},
    {"autotune", "bayes_opt_max_samples", "--autotune-bayes-opt-max-samples", NULL},
    {"autotune", "gaussian_process_noise", "--autotune-gaussian-process-noise", NULL},
    {"timeline", "filename", "--timeline-filename", NULL},
    {"timeline", "mark_cycles", "--timeline-mark-cycles", "--no-timeline-mark-cycles"},
    {"stall_check", "enabled", "--stall-check", "--no-stall-check"},
    {"stall_check", "warning_time_seconds", "--stall-check-warning-time-seconds", NULL},
    {"stall_check", "shutdown_time_seconds", "--stall-check-shutdown-time-seconds", NULL},
    {"library_options", "mpi_threads_disable", "--mpi-threads-disable", "--no-mpi-threads-disable"},
    {"library_options", "num_nccl_streams", "--num-nccl-streams", NULL},
    {"library_options", "gloo_timeout_seconds", "--gloo-timeout-seconds", NULL},
    {"logging", "level", "--log-level", NULL},
    {"logging", "with_timestamp", "--log-with-timestamp", "--log-without-timestamp"},
};

/* YAML 1.1's booleans, as horovodrun's loader reads them; -1 for anything else. */
static int yaml_bool(const char* v) {
  static const char* const yes[] = {"true", "yes", "on", "y"};
  static const char* const no[] = {"false", "no", "off", "n"};
  for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
    if (strcasecmp(v, yes[i]) == 0) return 1;
    if (strcasecmp(v, no[i]) == 0) return 0;
  }
  return -1;
}

/* "section.key", or "key" at top level. */
static void entry_name(const hvds_yaml_entry_t* e, char* out, size_t len) {
  snprintf(out, len, "%s%s%s", e->section, e->section[0] ? "." : "", e->key);
}

static hvds_result_t warn(hvds_run_args_t* a, const hvds_yaml_entry_t* e, const char* why) {
  char name[160];
  entry_name(e, name, sizeof(name));
  char label[200];
  snprintf(label, sizeof(label), "config file key %s", name);
  return hvds__env_list_set(&a->warnings, label, why);
}

/* controller: gloo|mpi chooses nothing here; anything else is an error, as in horovodrun. */
static hvds_result_t apply_controller(hvds_run_args_t* a, const hvds_yaml_entry_t* e, char* err,
                                      size_t errlen) {
  if (strcasecmp(e->value, "gloo") != 0 && strcasecmp(e->value, "mpi") != 0) {
    snprintf(err, errlen, "line %d: controller: no such controller '%.64s' (gloo or mpi)", e->line,
             e->value);
    return HVDS_INVALID_ARGUMENT;
  }
  return warn(a, e, "the controller is always hvdsparse's own");
}

static hvds_result_t apply_entry(hvds_run_args_t* a, const hvds_yaml_entry_t* e, char* err,
                                 size_t errlen) {
  char name[160], why[384];
  entry_name(e, name, sizeof(name));
  if (e->is_null) return HVDS_SUCCESS;  // YAML's null: not set, as horovodrun reads it
  if (e->section[0] == '\0' && strcmp(e->key, "controller") == 0)
    return apply_controller(a, e, err, errlen);
  if (strcmp(e->section, "library_options") == 0 && strcmp(e->key, "ccl_bgt_affinity") == 0)
    return warn(a, e, "no oneCCL is used");
  for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++) {
    if (strcmp(settings[i].section, e->section) != 0 || strcmp(settings[i].key, e->key) != 0)
      continue;
    const char* flag = settings[i].flag;
    const char* value = e->value;
    if (settings[i].if_false != NULL) {
      int b = yaml_bool(e->value);
      if (b < 0) {
        snprintf(err, errlen, "line %d: %s: expected true or false, not '%.64s'", e->line, name,
                 e->value);
        return HVDS_INVALID_ARGUMENT;
      }
      flag = b ? settings[i].flag : settings[i].if_false;
      value = NULL;
    }
    for (int k = 0; k < hvds__no_effect_flag_count; k++)  // warned about under the key's name
      if (strcmp(hvds__no_effect_flags[k].flag, flag) == 0)
        return warn(a, e, hvds__no_effect_flags[k].why);
    hvds_result_t rc = hvds__run_args_apply_setting(a, flag, value, why, sizeof(why));
    if (rc != HVDS_SUCCESS) snprintf(err, errlen, "line %d: %s: %.300s", e->line, name, why);
    return rc;
  }
  return warn(a, e, "horovodrun knows no such setting; ignored");
}

hvds_result_t hvds__config_file_apply(const char* path, hvds_run_args_t* a, char* err,
                                      size_t errlen) {
  hvds_yaml_entry_t* entries = NULL;
  int n = 0;
  char why[512] = "";
  hvds_result_t rc = hvds__yaml_map_read(path, &entries, &n, why, sizeof(why));
  for (int i = 0; i < n && rc == HVDS_SUCCESS; i++) rc = apply_entry(a, &entries[i], why, sizeof(why));
  free(entries);
  if (rc != HVDS_SUCCESS) snprintf(err, errlen, "--config-file %s: %s", path, why);
  return rc;
}
