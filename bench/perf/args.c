/* Command line of hvdsparse-perf: a collective, then nccl-tests style options. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf.h"

static const perf_coll_t* const kColls[] = {&perf_allreduce, &perf_allgather, &perf_broadcast,
                                            &perf_alltoall, &perf_reducescatter};

const perf_coll_t* perf_find_coll(const char* name) {
  for (size_t k = 0; k < sizeof(kColls) / sizeof(kColls[0]); k++)
    if (!strcmp(name, kColls[k]->name)) return kColls[k];
  return NULL;
}

static void usage(FILE* f) {
  fprintf(f,
          "usage: hvdsparse run -np N hvdsparse-perf COLLECTIVE [options]\n"
          "  COLLECTIVE   allreduce | allgather | broadcast | alltoall | reducescatter\n"
          "               (sparse_allreduce has its own options: sparse_allreduce --help)\n");
  hvds_bench_sweep_usage(f);
  fprintf(f,
          "  -d TYPE      uint8 int8 uint16 int16 int32 int64 float16 float32 float64 bfloat16\n"
          "               (default float32)\n"
          "  -o OP        sum | avg | min | max | prod (allreduce, reducescatter; default sum)\n"
          "  -r RANK      broadcast root (default 0)\n"
          "  --oop        allreduce out of place (default in place)\n"
          "  --times FILE rank 0 writes each timed iteration's time (slowest rank), in the\n"
          "               order they ran, as CSV rows bytes,iteration,us (warm-up visible)\n"
          "  --pause MS   every rank sleeps MS ms before each size's middle timed iteration,\n"
          "               as a job's CPUs idle between steps (what warmth survives it)\n"
          "Sizes are the allreduce/broadcast tensor, the allgather output, the reducescatter\n"
          "input and the alltoall send buffer, in bytes.\n");
}

// Parses the options that are not sweep options; returns 1 consumed, 0 unknown, -1 bad value.
static int parse_own(int argc, char** argv, int* i, perf_args_t* a) {
  const char* opt = argv[*i];
  if (!strcmp(opt, "--oop")) {
    a->inplace = 0;
    return 1;
  }
  if (strcmp(opt, "-d") && strcmp(opt, "-o") && strcmp(opt, "-r") && strcmp(opt, "--times") &&
      strcmp(opt, "--pause"))
    return 0;
  if (*i + 1 >= argc) {
    fprintf(stderr, "%s needs a value\n", opt);
    return -1;
  }
  const char* val = argv[++*i];
  if (!strcmp(opt, "-d") && perf_parse_dtype(val, &a->dtype) != 0) {
    fprintf(stderr, "unknown type '%s'\n", val);
    return -1;
  }
  if (!strcmp(opt, "-o") && perf_parse_op(val, &a->op) != 0) {
    fprintf(stderr, "unknown op '%s'\n", val);
    return -1;
  }
  if (!strcmp(opt, "-r")) a->root = atoi(val);
  if (!strcmp(opt, "--times")) a->times = val;
  if (!strcmp(opt, "--pause")) {
    char* end = NULL;
    long ms = strtol(val, &end, 10);
    if (end == val || *end != '\0' || ms < 0 || ms > 3600000) {
      fprintf(stderr, "--pause needs milliseconds from 0 to 3600000, not '%s'\n", val);
      return -1;
    }
    a->pause_ms = (int)ms;
  }
  return 1;
}

int perf_parse_args(int argc, char** argv, perf_args_t* a) {
  memset(a, 0, sizeof(*a));
  hvds_bench_sweep_defaults(&a->sweep, "hvdsparse");
  a->dtype = HVDS_FLOAT32;
  a->op = HVDS_SUM;
  a->inplace = 1;
  if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? -1 : 1;
  }
  a->coll = argv[1];
  if (perf_find_coll(a->coll) == NULL) {
    fprintf(stderr, "unknown collective '%s'\n", a->coll);
    usage(stderr);
    return -1;
  }
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      usage(stdout);
      return 1;
    }
    int rc = hvds_bench_parse_sweep_opt(argc, argv, &i, &a->sweep);
    if (rc == 0) rc = parse_own(argc, argv, &i, a);
    if (rc < 0) return -1;
    if (rc == 0) {
      fprintf(stderr, "unknown option '%s'\n", argv[i]);
      usage(stderr);
      return -1;
    }
  }
  if (a->sweep.min_bytes > a->sweep.max_bytes) {
    fprintf(stderr, "-b is larger than -e\n");
    return -1;
  }
  return 0;
}
