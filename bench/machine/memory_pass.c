/* The memory work of a shared-memory allreduce without its communication: every thread, one
 * per rank, pinned to CPU (rank mod CPUs), adds a float32 buffer of SIZE bytes into another,
 * then waits at a barrier for the others, ITERS times. The median pass time, run after run,
 * shows how steady this machine's memory and CPUs are at that size; no collective that moves
 * the same bytes through the same caches can be steadier than this.
 *
 *   memory_pass -b SIZE -t THREADS [-n ITERS] [-w WARMUP] [--csv]
 *
 * SIZE takes K, M and G suffixes. --csv prints a header and one row (bytes, threads, iters,
 * time_us, min_us, max_us) as hvdsparse-perf does. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Waits as a shared-memory collective's ranks wait for each other: a short spin, then yielding
 * the CPU, since threads can outnumber the CPUs (np 4 on 2). */
typedef struct {
  _Atomic int arrived, generation;
  int n;
} barrier_t;

static void barrier_wait(barrier_t* b) {
  int gen = atomic_load(&b->generation);
  if (atomic_fetch_add(&b->arrived, 1) == b->n - 1) {
    atomic_store(&b->arrived, 0);
    atomic_fetch_add(&b->generation, 1);
    return;
  }
  for (int spins = 0; atomic_load(&b->generation) == gen; spins++) {
    if (spins < 2000)
      __builtin_ia32_pause();
    else
      sched_yield();
  }
}

typedef struct {
  int id, iters, warmup;
  size_t count;
  barrier_t* barrier;
  double* times; /* thread 0 only: one per timed pass */
} worker_t;

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void pin(int id) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET((int)(id % (cpus > 0 ? cpus : 1)), &s);
  pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

/* One pass is one reduction of the buffer; a pass's time is thread 0's, from the barrier that
 * starts it to the barrier that ends it, so the slowest thread decides it. */
static void* work(void* arg) {
  worker_t* w = arg;
  pin(w->id);
  float* src = malloc(w->count * sizeof(float));
  float* dst = malloc(w->count * sizeof(float));
  if (src == NULL || dst == NULL) {
    fprintf(stderr, "memory_pass: out of memory\n");
    exit(1);
  }
  for (size_t i = 0; i < w->count; i++) src[i] = dst[i] = 1.0f; /* first touch on this CPU */
  for (int it = -w->warmup; it < w->iters; it++) {
    barrier_wait(w->barrier);
    double t0 = now_us();
    for (size_t i = 0; i < w->count; i++) dst[i] += src[i];
    barrier_wait(w->barrier);
    if (w->times != NULL && it >= 0) w->times[it] = now_us() - t0;
  }
  volatile float keep = dst[w->count / 2]; /* the sums are used */
  (void)keep;
  free(src);
  free(dst);
  return NULL;
}

static size_t parse_size(const char* s) {
  char* end;
  double v = strtod(s, &end);
  switch (*end) {
    case 'G':
      v *= 1024.0;  // fall through
    case 'M':
      v *= 1024.0;  // fall through
    case 'K':
      v *= 1024.0;
  }
  return (size_t)v;
}

static int by_value(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  size_t bytes = 0;
  int threads = 0, iters = 100, warmup = 5, csv = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-b") && i + 1 < argc)
      bytes = parse_size(argv[++i]);
    else if (!strcmp(argv[i], "-t") && i + 1 < argc)
      threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-n") && i + 1 < argc)
      iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-w") && i + 1 < argc)
      warmup = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--csv"))
      csv = 1;
    else
      bytes = 0, i = argc;
  }
  if (bytes < sizeof(float) || threads < 1 || iters < 1 || warmup < 0) {
    fprintf(stderr, "usage: memory_pass -b SIZE -t THREADS [-n ITERS] [-w WARMUP] [--csv]\n");
    return 2;
  }
  barrier_t barrier = {0, 0, threads};
  double* times = calloc((size_t)iters, sizeof(double));
  worker_t* ws = calloc((size_t)threads, sizeof(worker_t));
  pthread_t* ts = calloc((size_t)threads, sizeof(pthread_t));
  if (times == NULL || ws == NULL || ts == NULL) return 1;
  for (int i = 0; i < threads; i++) {
    ws[i] = (worker_t){i, iters, warmup, bytes / sizeof(float), &barrier, i == 0 ? times : NULL};
    pthread_create(&ts[i], NULL, work, &ws[i]);
  }
  for (int i = 0; i < threads; i++) pthread_join(ts[i], NULL);
  qsort(times, (size_t)iters, sizeof(double), by_value);
  double median = times[iters / 2], lo = times[0], hi = times[iters - 1];
  if (csv)
    printf("bytes,threads,iters,time_us,min_us,max_us\n%zu,%d,%d,%.1f,%.1f,%.1f\n", bytes, threads,
           iters, median, lo, hi);
  else
    printf("%zu bytes, %d threads, %d passes: median %.1f us (min %.1f, max %.1f)\n", bytes,
           threads, iters, median, lo, hi);
  free(times);
  free(ws);
  free(ts);
  return 0;
}
