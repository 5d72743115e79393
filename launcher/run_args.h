/* Command line of `hvdsparse run`, mirroring horovodrun's flags. */
#ifndef HVDS_LAUNCHER_RUN_ARGS_H_
#define HVDS_LAUNCHER_RUN_ARGS_H_

#include <stddef.h>
#include <stdio.h>

#include "hvdsparse.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One environment assignment. Both strings are owned by the list that holds them. */
typedef struct {
  char* name;
  char* value; /* NULL in a -x list: forward the launcher's own value */
} hvds_env_kv_t;

typedef struct {
  hvds_env_kv_t* items;
  int n, cap;
} hvds_env_list_t;

/* Sets name=value, replacing an earlier entry of the same name; copies both (value may be NULL). */
hvds_result_t hvds__env_list_set(hvds_env_list_t* list, const char* name, const char* value);
/* The value set for name, or NULL. */
const char* hvds__env_list_get(const hvds_env_list_t* list, const char* name);
void hvds__env_list_free(hvds_env_list_t* list);

typedef struct {
  int np;                         /* -np; 0 when absent */
  const char* hosts;              /* -H, or NULL */
  const char* hostfile;           /* --hostfile, or NULL */
  double start_timeout;           /* --start-timeout; < 0 when absent */
  int verbose;
  const char* output_filename;    /* --output-filename DIR */
  const char* rsh;                /* --rsh agent, or NULL for ssh */
  int ssh_port;                   /* -p; 0 when absent */
  const char* ssh_identity;       /* -i */
  const char* rendezvous_addr;    /* --rendezvous-addr */
  char* network_interfaces;       /* --network-interfaces a,b and every --network-interface,
                                     joined with ',' without repeats; owned, or NULL */
  const char* config_file;        /* --config-file: horovodrun's YAML (config_file.h) */
  int horovod_alias;
  int keep_freed_memory;          /* --keep-freed-memory */
  int prefix_timestamp;           /* --prefix-output-with-timestamp */
  int check_build;                /* -cb / --check-build: print what this build supports */
  int help, version;
  int elastic;                    /* --min-np or --host-discovery-script given (elastic.h) */
  int min_np, max_np;             /* --min-np, --max-np; 0 when absent */
  const char* discovery_script;   /* --host-discovery-script: prints "host:slots" lines */
  int slots_per_host;             /* --slots-per-host; 0 when absent */
  double elastic_timeout;         /* --elastic-timeout; < 0 when absent (600 s) */
  int reset_limit;                /* --reset-limit; 0 when absent (no limit) */
  int cooldown_min, cooldown_max; /* --blacklist-cooldown-range, seconds; 0 when absent (a failed
                                     host is never used again) */
  int blacklist_slots;            /* --blacklist-scope slot: a failure bans its slot only, not
                                     its whole host (Horovod's) */
  hvds_env_list_t knobs;          /* suffix -> value, exported as HVDSPARSE_<s> and HOROVOD_<s> */
  int cli_knobs;                  /* knobs[0, cli_knobs) came from the command line */
  hvds_env_list_t xvars;          /* -x NAME[=VALUE] */
  hvds_env_list_t warnings;       /* flag or config key -> why it has no effect here */
  char** command;                 /* points into argv; NULL-terminated there */
  int ncommand;
} hvds_run_args_t;

/* Parses the flags among the words after "run" (argv[0] is the first flag; the whole command
 * line with --config-file's settings is command_line.h's). Flags stop at the first word that is
 * not a flag; the rest is the command. Strings point into argv except in the lists and
 * network_interfaces, which the caller releases with hvds__run_args_free(). On error nothing is
 * kept and err says why. */
hvds_result_t hvds__run_args_parse_flags(int argc, char** argv, hvds_run_args_t* out /* OUT */,
                                         char* err, size_t errlen);
/* What the settings say together: a command, -np, no two host lists, elastic flags only in an
 * elastic job. HVDS_INVALID_ARGUMENT with err saying why otherwise. */
hvds_result_t hvds__run_args_check_complete(const hvds_run_args_t* a, char* err, size_t errlen);
/* Applies one setting of a config file as the flag it stands for (value NULL for a flag without
 * one), unless the command line set the same knob. For config_file.c; err says why it failed. */
hvds_result_t hvds__run_args_apply_setting(hvds_run_args_t* a, const char* flag, const char* value,
                                           char* err, size_t errlen);
/* Prints "hvdsparse: warning: <flag>: <why>" for every accepted flag that has no effect. */
void hvds__run_args_print_warnings(const hvds_run_args_t* args, FILE* f);
void hvds__run_args_free(hvds_run_args_t* args);
void hvds__run_args_usage(FILE* f);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_LAUNCHER_RUN_ARGS_H_ */
