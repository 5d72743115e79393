/* Shared sweep options, statistics and output of the benchmark tools; see bench_util.h. */
#include "bench_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void hvds_bench_sweep_defaults(hvds_bench_sweep_t* s, const char* label) {
  s->min_bytes = 8;
  s->max_bytes = 64 << 20;
  s->factor = 2;
  s->iters = 20;
  s->warmup = 5;
  s->check = 1;
  s->csv = 0;
  s->label = label;
}

int hvds_bench_parse_size(const char* text, size_t* out) {
  char* end = NULL;
  double v = strtod(text, &end);
  if (end == text || v < 0) return -1;
  double scale = 1;
  switch (*end) {
    case 'k':
    case 'K':
      scale = 1024.0;
      end++;
      break;
    case 'm':
    case 'M':
      scale = 1024.0 * 1024;
      end++;
      break;
    case 'g':
    case 'G':
      scale = 1024.0 * 1024 * 1024;
      end++;
      break;
    default:
      break;
  }
  if (*end == 'B' || *end == 'b') end++;  // "64MB" reads as 64M
  if (*end != '\0') return -1;
  *out = (size_t)(v * scale);
  return 0;
}

static int parse_int(const char* opt, const char* text, int lo, int* out) {
  char* end = NULL;
  long v = strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < lo || v > 1000000000L) {
    fprintf(stderr, "bad value '%s' for %s\n", text, opt);
    return -1;
  }
  *out = (int)v;
  return 0;
}

int hvds_bench_parse_sweep_opt(int argc, char** argv, int* i, hvds_bench_sweep_t* s) {
  const char* opt = argv[*i];
  if (strcmp(opt, "--csv") == 0) {
    s->csv = 1;
    return 1;
  }
  static const char* const kValued[] = {"-b", "-e", "-f", "-n", "-w", "-c", "--label"};
  int known = 0;
  for (size_t k = 0; k < sizeof(kValued) / sizeof(kValued[0]); k++)
    known |= !strcmp(opt, kValued[k]);
  if (!known) return 0;
  if (*i + 1 >= argc) {
    fprintf(stderr, "%s needs a value\n", opt);
    return -1;
  }
  const char* val = argv[++*i];
  int iv = 0;
  if (!strcmp(opt, "-b") || !strcmp(opt, "-e")) {
    size_t* dst = opt[1] == 'b' ? &s->min_bytes : &s->max_bytes;
    if (hvds_bench_parse_size(val, dst) != 0) {
      fprintf(stderr, "bad size '%s' for %s (use e.g. 8, 1K, 64M, 1G)\n", val, opt);
      return -1;
    }
  } else if (!strcmp(opt, "-f")) {
    if (parse_int(opt, val, 2, &iv) != 0) return -1;
    s->factor = (size_t)iv;
  } else if (!strcmp(opt, "-n")) {
    if (parse_int(opt, val, 1, &s->iters) != 0) return -1;
  } else if (!strcmp(opt, "-w")) {
    if (parse_int(opt, val, 0, &s->warmup) != 0) return -1;
  } else if (!strcmp(opt, "-c")) {
    if (parse_int(opt, val, 0, &s->check) != 0) return -1;
  } else {
    s->label = val;
  }
  return 1;
}

void hvds_bench_sweep_usage(FILE* f) {
  fprintf(f,
          "  -b SIZE      smallest size in bytes, K/M/G suffixes (default 8)\n"
          "  -e SIZE      largest size (default 64M)\n"
          "  -f N         multiply the size by N each step (default 2)\n"
          "  -n N         timed iterations per size (default 20)\n"
          "  -w N         warm-up iterations per size (default 5)\n"
          "  -c 0|1       check the result at every size (default 1)\n"
          "  --csv        print CSV rows instead of the table\n"
          "  --label TEXT name in the CSV's impl column\n");
}

double hvds_bench_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

void hvds_bench_stats(double* t, int n, double* median, double* min) {
  if (n <= 0) {
    *median = *min = 0;
    return;
  }
  qsort(t, (size_t)n, sizeof(double), cmp_double);
  *min = t[0];
  *median = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

void hvds_bench_row_times(hvds_bench_row_t* row, double* t, int n) {
  row->first_us = n > 0 ? t[0] : 0;
  hvds_bench_stats(t, n, &row->time_us, &row->min_us);
  row->max_us = n > 0 ? t[n - 1] : 0;
}

double hvds_bench_bus_factor(const char* coll, int np) {
  if (np <= 1) return 1.0;
  if (!strcmp(coll, "allreduce")) return 2.0 * (np - 1) / np;
  if (!strcmp(coll, "broadcast")) return 1.0;
  return (double)(np - 1) / np;  // allgather, reducescatter, alltoall
}

void hvds_bench_row_bandwidth(hvds_bench_row_t* row) {
  row->algbw = row->time_us > 0 ? (double)row->bytes / (row->time_us * 1e3) : 0;
  row->busbw = row->algbw * hvds_bench_bus_factor(row->coll, row->np);
}

void hvds_bench_fill_f32(float* p, size_t n, int rank) {
  for (size_t i = 0; i < n; i++) p[i] = (float)hvds_bench_value(rank, i);
}

long hvds_bench_check_sum_f32(const float* p, size_t n, int np, double* max_err) {
  float want[11];  // the pattern repeats every 11 elements
  for (size_t k = 0; k < 11; k++) {
    int s = 0;
    for (int r = 0; r < np; r++) s += hvds_bench_value(r, k);
    want[k] = (float)s;
  }
  long wrong = 0;
  double worst = 0;
  for (size_t i = 0; i < n; i++) {
    double err = fabs((double)p[i] - (double)want[i % 11]);
    if (err > 0 || err != err) {
      wrong++;
      if (!(err <= worst)) worst = err;
    }
  }
  *max_err = worst;
  return wrong;
}

void hvds_bench_print_header(FILE* f, const char* title, const char* info,
                             const hvds_bench_sweep_t* s, int np) {
  fprintf(f, "# %s: np %d, sizes %zu..%zu x%zu, iters %d, warmup %d, check %d\n", title, np,
          s->min_bytes, s->max_bytes, s->factor, s->iters, s->warmup, s->check);
  if (info != NULL) fprintf(f, "# %s\n", info);
  fprintf(f,
          "# time = median (min, max, first) over iterations of the slowest rank's "
          "start-to-completion time\n");
  if (s->csv) {
    fprintf(f,
            "impl,coll,np,bytes,count,dtype,redop,time_us,min_us,algbw_gbs,busbw_gbs,wrong,"
            "max_err,max_us,first_us\n");
    return;
  }
  fprintf(f, "#\n#%13s %13s %9s %7s %11s %11s %11s %11s %8s %8s %8s %9s\n", "size", "count", "type",
          "redop", "time", "min", "max", "first", "algbw", "busbw", "#wrong", "max_err");
  fprintf(f, "#%13s %13s %9s %7s %11s %11s %11s %11s %8s %8s %8s %9s\n", "(B)", "(elements)", "",
          "", "(us)", "(us)", "(us)", "(us)", "(GB/s)", "(GB/s)", "", "");
}

void hvds_bench_print_row(FILE* f, const hvds_bench_row_t* r, int csv) {
  if (csv) {
    fprintf(f, "%s,%s,%d,%zu,%zu,%s,%s,%.2f,%.2f,%.4f,%.4f,%ld,%g,%.2f,%.2f\n", r->impl, r->coll,
            r->np, r->bytes, r->count, r->dtype, r->redop, r->time_us, r->min_us, r->algbw,
            r->busbw, r->wrong, r->max_err, r->max_us, r->first_us);
  } else if (r->wrong < 0) {
    fprintf(f, " %13zu %13zu %9s %7s %11.1f %11.1f %11.1f %11.1f %8.3f %8.3f %8s %9s\n", r->bytes,
            r->count, r->dtype, r->redop, r->time_us, r->min_us, r->max_us, r->first_us, r->algbw,
            r->busbw, "N/A", "N/A");
  } else {
    fprintf(f, " %13zu %13zu %9s %7s %11.1f %11.1f %11.1f %11.1f %8.3f %8.3f %8ld %9.3g\n",
            r->bytes, r->count, r->dtype, r->redop, r->time_us, r->min_us, r->max_us, r->first_us,
            r->algbw, r->busbw, r->wrong, r->max_err);
  }
  fflush(f);
}

void hvds_bench_print_footer(FILE* f, long wrong_total, double avg_busbw, int checked) {
  if (checked)
    fprintf(f, "# Out of bounds values : %ld %s\n", wrong_total, wrong_total ? "FAILED" : "OK");
  else
    fprintf(f, "# Out of bounds values : not checked\n");
  fprintf(f, "# Avg bus bandwidth    : %.4f\n#\n", avg_busbw);
  fflush(f);
}
