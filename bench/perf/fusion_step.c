/* hvdsparse-fusion-bench: N small tensors allreduced per step (the pattern of a model's
 * gradients) against one allreduce of their total size, as the acceptance measures it.
 *
 *   hvdsparse run -np 2 hvdsparse-fusion-bench [-t tensors] [-s bytes_each] [-n iters] [-w warmup]
 *
 * Rank 0 prints the median and min step time, the median and min single allreduce time, and the
 * ratio of medians. Steps and singles alternate so both see the same machine. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hvdsparse.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_dbl(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof(double), cmp_dbl);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int wait_all(hvds_handle_t* hs, int n) {
  for (int k = 0; k < n; k++) {
    if (hvds_wait(hs[k], -1) != HVDS_SUCCESS) {
      fprintf(stderr, "allreduce failed: %s\n", hvds_handle_error(hs[k]));
      return -1;
    }
    hvds_release(hs[k]);
  }
  return 0;
}

int main(int argc, char** argv) {
  int tensors = 1000, iters = 30, warmup = 5;
  size_t each = 4096;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-t")) tensors = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "-s")) each = (size_t)atol(argv[i + 1]);
    else if (!strcmp(argv[i], "-n")) iters = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "-w")) warmup = atoi(argv[i + 1]);
  }
  if (hvds_init() != HVDS_SUCCESS) {
    fprintf(stderr, "init failed: %s\n", hvds_last_error());
    return 1;
  }
  size_t el = each / sizeof(float), total = el * (size_t)tensors;
  float* data = calloc(total, sizeof(float));
  hvds_handle_t* hs = malloc((size_t)tensors * sizeof(*hs));
  double* steps = malloc((size_t)iters * sizeof(double));
  double* singles = malloc((size_t)iters * sizeof(double));
  char name[64];
  int rc = 0;
  for (int it = -warmup; it < iters && rc == 0; it++) {
    double t0 = now();
    for (int k = 0; k < tensors && rc == 0; k++) {
      hvds_tensor_t t = {data + (size_t)k * el, HVDS_FLOAT32, -1, 1, {(int64_t)el}};
      hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
      snprintf(name, sizeof(name), "grad.%d", k);
      o.name = name;
      if (hvds_allreduce_async(&t, &t, &o, &hs[k]) != HVDS_SUCCESS) rc = 1;
    }
    if (rc == 0) rc = wait_all(hs, tensors);
    double step = now() - t0;
    hvds_tensor_t whole = {data, HVDS_FLOAT32, -1, 1, {(int64_t)total}};
    hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
    o.name = "whole";
    t0 = now();
    if (rc == 0 && hvds_allreduce_async(&whole, &whole, &o, &hs[0]) != HVDS_SUCCESS) rc = 1;
    if (rc == 0) rc = wait_all(hs, 1);
    if (it >= 0) {
      steps[it] = step;
      singles[it] = now() - t0;
    }
  }
  if (rc == 0 && hvds_rank() == 0) {
    double smin = 1e9, omin = 1e9;
    for (int i = 0; i < iters; i++) {
      if (steps[i] < smin) smin = steps[i];
      if (singles[i] < omin) omin = singles[i];
    }
    double sm = median(steps, iters), om = median(singles, iters);
    printf("tensors %d x %zu B, np %d: step median %.3f ms (min %.3f), one allreduce of %zu B "
           "median %.3f ms (min %.3f), ratio %.2f\n",
           tensors, each, hvds_size(), sm * 1e3, smin * 1e3, total * sizeof(float), om * 1e3,
           omin * 1e3, sm / om);
  }
  hvds_shutdown();
  free(data);
  free(hs);
  free(steps);
  free(singles);
  return rc;
}
