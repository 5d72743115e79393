/* hvdsparse-sim's command line: options shared by the commands, and one function per command
 * (sim_cmd.c, sim_fit_cmd.c, sim_published.c). Commands print to stdout and return the exit
 * status. */
#ifndef HVDS_SIM_CLI_H_
#define HVDS_SIM_CLI_H_

#include <stddef.h>
#include <stdio.h>

#include "sim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Defaults of the prediction tables (docs/simulator.md): alpha of a TCP data-centre network (the
 * sparse cost model's default); gamma and copy of one core at about 4 GB/s, and the runtime
 * overhead, in the range bench/sim/calibrate.sh measured on the 2-core development machine. */
#define SIM_DEFAULT_ALPHA 20e-6
#define SIM_DEFAULT_GAMMA 2.5e-10
#define SIM_DEFAULT_COPY 2.5e-10
#define SIM_DEFAULT_OVERHEAD 30e-6

#define SIM_MAX_LIST 16

typedef struct {
  int ranks[SIM_MAX_LIST]; /* --ranks */
  int nranks;
  double gbit[SIM_MAX_LIST]; /* --gbit: link rates */
  int ngbit;
  double alpha, gamma, copy, overhead; /* seconds (per byte for gamma and copy) */
  const char* colls;                   /* --coll: comma list, NULL = all */
  size_t size_lo, size_hi, size_factor;
  const char* model; /* --model: preset or bucket file, NULL = every preset */
  int detail;        /* --detail P: per-bucket table at P ranks */
  int markdown;      /* --md */
  /* fit */
  int cores;
  size_t small_max;
  double beta0;
  const char* csv_out;
  const char* md_out;
  hvds_sim_cfg_t cfg; /* the runtime's knobs */
} sim_opts_t;

/* "1K:1G:8" (K, M, G = powers of 1024). Returns 0, or -1. */
int sim_parse_sizes(const char* s, size_t* lo, size_t* hi, size_t* factor);

/* "1.5 KiB", "64 MiB": the size in binary units, into buf. */
const char* sim_fmt_size(size_t bytes, char* buf, size_t len);
/* Seconds as "12.3 us", "4.56 ms", "1.23 s". */
const char* sim_fmt_time(double s, char* buf, size_t len);

/* Prints a table row: cells separated by " | " in markdown, padded columns otherwise. */
void sim_row(FILE* f, int markdown, int ncells, const char* const* cells);
void sim_rule(FILE* f, int markdown, int ncells);

int sim_cmd_collective(const sim_opts_t* o);
int sim_cmd_step(const sim_opts_t* o, const char* file);
int sim_cmd_models(const sim_opts_t* o);
int sim_cmd_gamma(const sim_opts_t* o);
int sim_cmd_fit(const sim_opts_t* o, const char* file);
int sim_cmd_published(const sim_opts_t* o);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_SIM_CLI_H_ */
