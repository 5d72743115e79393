/* hvdsparse-sim: predicted time of hvdsparse's collectives and training steps (sim.h).
 *
 *   hvdsparse-sim collective [--coll allreduce,...] [--sizes 1K:1G:8]   per-collective tables
 *   hvdsparse-sim step [--model lstm|dlrm|resnet50|bert|FILE] [--detail]  per-step tables
 *   hvdsparse-sim models                                                 the presets' buckets
 *   hvdsparse-sim gamma                                                  time the reduce kernel
 *   hvdsparse-sim fit FILE.csv [--gamma G --cores N --csv OUT --md-out OUT]    calibration
 *   hvdsparse-sim published                                              ZEN and SparCML figures
 * Common options: --ranks 8,16,..  --gbit 10,25,100  --alpha S  --gamma S  --copy S
 * --overhead S (seconds, per byte for gamma and copy). The runtime's knobs
 * (HVDSPARSE_RHD_MAX_BYTES, ...) apply as in hvds_init.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_cli.h"

static void usage(FILE* f) {
  fprintf(f,
          "usage: hvdsparse-sim COMMAND [options]\n"
          "  collective [--coll allreduce,reducescatter,allgather,broadcast] [--sizes 1K:1G:8]\n"
          "  step [--model lstm|dlrm|resnet50|bert|FILE] [--detail P]\n"
          "  models | gamma | published\n"
          "  fit FILE.csv [--gamma S] [--cores N] [--small-max BYTES]"
          " [--beta0 S] [--csv OUT]"
          " [--md-out OUT]\n"
          "options: --ranks 8,16,...,1024 --gbit 10,25,100 --alpha S (default %g) --gamma S "
          "(default %g)\n"
          "         --copy S (default %g) --overhead S (default %g) --md (markdown tables)\n"
          "bucket FILE lines: name elements density [row=R] [overlap=W] [val=B] [idx=B]\n",
          SIM_DEFAULT_ALPHA, SIM_DEFAULT_GAMMA, SIM_DEFAULT_COPY, SIM_DEFAULT_OVERHEAD);
}

/* Parses "a,b,c" into at most max doubles. Returns the count, or -1. */
static int parse_list(const char* s, double* out, int max) {
  int n = 0;
  while (*s && n < max) {
    char* end;
    out[n] = strtod(s, &end);
    if (end == s || out[n] <= 0) return -1;
    n++;
    s = *end == ',' ? end + 1 : end;
    if (*end != ',' && *end != '\0') return -1;
  }
  return n;
}

static int parse_double(const char* s, double* out) {
  char* end;
  *out = strtod(s, &end);
  return end != s && *end == '\0' && *out >= 0 ? 0 : -1;
}

/* Consumes a common option at argv[*i]; 1 if it was one, 0 if not, -1 on a bad value. */
static int common_opt(int argc, char** argv, int* i, sim_opts_t* o) {
  const char* a = argv[*i];
  int takes = !strcmp(a, "--ranks") || !strcmp(a, "--gbit") || !strcmp(a, "--alpha") ||
              !strcmp(a, "--gamma") || !strcmp(a, "--copy") || !strcmp(a, "--overhead") ||
              !strcmp(a, "--coll") || !strcmp(a, "--sizes") || !strcmp(a, "--model") ||
              !strcmp(a, "--detail") || !strcmp(a, "--cores") || !strcmp(a, "--small-max") ||
              !strcmp(a, "--beta0") || !strcmp(a, "--csv") || !strcmp(a, "--md-out");
  if (!strcmp(a, "--md")) {
    o->markdown = 1;
    return 1;
  }
  if (!takes) return 0;
  if (*i + 1 >= argc) {
    fprintf(stderr, "%s needs a value\n", a);
    return -1;
  }
  const char* v = argv[++*i];
  double d = 0;
  int ok = 0;
  if (!strcmp(a, "--ranks")) {
    double r[SIM_MAX_LIST];
    o->nranks = parse_list(v, r, SIM_MAX_LIST);
    for (int k = 0; k < o->nranks; k++) o->ranks[k] = (int)r[k];
    ok = o->nranks > 0;
  } else if (!strcmp(a, "--gbit")) {
    o->ngbit = parse_list(v, o->gbit, SIM_MAX_LIST);
    ok = o->ngbit > 0;
  } else if (!strcmp(a, "--coll")) {
    o->colls = v, ok = 1;
  } else if (!strcmp(a, "--sizes")) {
    ok = sim_parse_sizes(v, &o->size_lo, &o->size_hi, &o->size_factor) == 0;
  } else if (!strcmp(a, "--model")) {
    o->model = v, ok = 1;
  } else if (!strcmp(a, "--csv")) {
    o->csv_out = v, ok = 1;
  } else if (!strcmp(a, "--md-out")) {
    o->md_out = v, ok = 1;
  } else {
    ok = parse_double(v, &d) == 0;
    if (!strcmp(a, "--alpha")) o->alpha = d;
    if (!strcmp(a, "--gamma")) o->gamma = d;
    if (!strcmp(a, "--copy")) o->copy = d;
    if (!strcmp(a, "--overhead")) o->overhead = d;
    if (!strcmp(a, "--detail")) o->detail = (int)d;
    if (!strcmp(a, "--cores")) o->cores = (int)d;
    if (!strcmp(a, "--small-max")) o->small_max = (size_t)d;
    if (!strcmp(a, "--beta0")) o->beta0 = d;
  }
  if (!ok) fprintf(stderr, "bad value for %s: '%s'\n", a, v);
  return ok ? 1 : -1;
}

static void defaults(sim_opts_t* o) {
  memset(o, 0, sizeof *o);
  static const int ranks[] = {8, 16, 32, 64, 128, 256, 512, 1024};
  o->nranks = 8;
  memcpy(o->ranks, ranks, sizeof ranks);
  o->ngbit = 3;
  o->gbit[0] = 10, o->gbit[1] = 25, o->gbit[2] = 100;
  o->alpha = SIM_DEFAULT_ALPHA;
  o->gamma = SIM_DEFAULT_GAMMA;
  o->copy = SIM_DEFAULT_COPY;
  o->overhead = SIM_DEFAULT_OVERHEAD;
  o->size_lo = 1024, o->size_hi = (size_t)1 << 30, o->size_factor = 8;
  o->cores = 2;
  o->small_max = 1024;
  o->beta0 = 0;  // the test bed's shaper passes small bursts unshaped (docs/simulator.md)
  hvds_sim_cfg_runtime(&o->cfg);
}

int main(int argc, char** argv) {
  if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  sim_opts_t o;
  defaults(&o);
  const char* cmd = argv[1];
  const char* file = NULL;
  for (int i = 2; i < argc; i++) {
    int rc = common_opt(argc, argv, &i, &o);
    if (rc < 0) return 2;
    if (rc == 0 && argv[i][0] != '-' && file == NULL) {
      file = argv[i];
    } else if (rc == 0) {
      fprintf(stderr, "unknown option %s\n", argv[i]);
      usage(stderr);
      return 2;
    }
  }
  if (!strcmp(cmd, "collective")) return sim_cmd_collective(&o);
  if (!strcmp(cmd, "step")) return sim_cmd_step(&o, file);
  if (!strcmp(cmd, "models")) return sim_cmd_models(&o);
  if (!strcmp(cmd, "gamma")) return sim_cmd_gamma(&o);
  if (!strcmp(cmd, "fit")) return sim_cmd_fit(&o, file);
  if (!strcmp(cmd, "published")) return sim_cmd_published(&o);
  fprintf(stderr, "unknown command '%s'\n", cmd);
  usage(stderr);
  return 2;
}
