/* The memory work of a shared-memory allreduce without its communication: every thread, one
 * per rank, pinned to CPU (rank mod CPUs), adds a float32 buffer of SIZE bytes into another,
 * then waits at a barrier for the others, ITERS times. The median pass time, run after run,
 * shows how steady this machine's memory and CPUs are at that size; no collective that moves
 * the same bytes through the same caches can be steadier than this.
 *
 * With -x (exchange) the threads also hand the data to each other as the ranks of a
 * shared-memory allreduce do, with the runtime's data movement (ops/shm/shm_coll.c) and no
 * protocol: in rounds of ROUND bytes (-r, default 4M, the runtime's round), thread t copies every
 * part of its round but part t into a slot of its own, adds part t of every other slot into its
 * buffer and scales it (an average, so buffers stay at 1), publishes it in its slot, and copies
 * every other part from its reducer's slot. Each round reads lines another CPU has just
 * written, so this also shows how steady the path between the CPUs is.
 *
 *   memory_pass -b SIZE -t THREADS [-x [-r ROUND]] [-n ITERS] [-w WARMUP] [--csv] [--times FILE]
 *               [--pause MS]
 *
 * SIZE takes K, M and G suffixes. --csv prints a header and one row (bytes, threads, iters,
 * time_us, min_us, max_us) as hvdsparse-perf does. --times appends each timed pass's time in
 * the order they ran (bytes,pass,us), as hvdsparse-perf --times does: with -w 0, the first
 * passes against the later ones show what warms up in the machine itself. --pause MS: every
 * thread sleeps MS milliseconds before the middle timed pass, as ranks leave their CPUs idle
 * while a training step computes; the passes after it show whether the warmth survived. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernel_clones.h"

/* Waits as a shared-memory collective's ranks wait for each other: a short spin, then yielding
 * the CPU; with more threads than CPUs (np 4 on 2) it yields at once, as the runtime's waits
 * do there, since a spin only delays the thread it waits for on the same CPU. */
typedef struct {
  _Atomic int arrived, generation;
  int n, spins; /* threads; pauses before the first yield */
} barrier_t;

static void barrier_wait(barrier_t* b) {
  int gen = atomic_load(&b->generation);
  if (atomic_fetch_add(&b->arrived, 1) == b->n - 1) {
    atomic_store(&b->arrived, 0);
    atomic_fetch_add(&b->generation, 1);
    return;
  }
  for (int spins = 0; atomic_load(&b->generation) == gen; spins++) {
    if (spins < b->spins)
      __builtin_ia32_pause();
    else
      sched_yield();
  }
}

typedef struct {
  int id, iters, warmup, threads, pause_ms;
  size_t count, round; /* elements: of the buffer, of a round (-x) */
  barrier_t* barrier;
  double* times;  /* thread 0 only: one per timed pass */
  float** shared; /* -x: every thread's slot */
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

/* Part p of count elements split over n threads: [*lo, *hi). */
static void part(size_t count, int n, int p, size_t* lo, size_t* hi) {
  *lo = count * (size_t)p / (size_t)n;
  *hi = count * (size_t)(p + 1) / (size_t)n;
}

/* The passes' loops vectorised as the runtime's reductions are (-O3, and an AVX2 clone where
 * the processor has it): a slower pass than the runtime's would hide what the machine does to
 * fast ones (at 1 MiB, np 2, scalar loops took 230-460 us a pass, the runtime 70-120). */
HVDS_CLONES_AVX2 static void add_into(float* restrict dst, const float* restrict src, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] += src[i];
}

HVDS_CLONES_AVX2 static void scale(float* dst, float by, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] *= by;
}

/* -x: per round, thread t copies every part but its own into its slot, adds part t of every
 * other slot into its buffer, averages it and publishes it in its slot, then copies every other
 * part from its reducer's slot. Buffers that start at 1 stay at 1, which work() checks at the
 * end. */
static void exchange(worker_t* w, float* buf) {
  float* slot = w->shared[w->id];
  const float by = 1.0f / (float)w->threads;
  for (size_t at = 0; at < w->count; at += w->round) {
    size_t len = w->count - at < w->round ? w->count - at : w->round, lo, hi;
    float* in = buf + at;
    part(len, w->threads, w->id, &lo, &hi);
    memcpy(slot, in, lo * sizeof(float));  // every part but this thread's own
    memcpy(slot + hi, in + hi, (len - hi) * sizeof(float));
    barrier_wait(w->barrier);
    for (int j = 0; j < w->threads; j++)
      if (j != w->id) add_into(in + lo, w->shared[j] + lo, hi - lo);
    scale(in + lo, by, hi - lo);
    memcpy(slot + lo, in + lo, (hi - lo) * sizeof(float));
    barrier_wait(w->barrier);
    for (int j = 0; j < w->threads; j++) {
      size_t jlo, jhi;
      part(len, w->threads, j, &jlo, &jhi);
      if (j != w->id) memcpy(in + jlo, w->shared[j] + jlo, (jhi - jlo) * sizeof(float));
    }
    barrier_wait(w->barrier);  // the slots are rewritten by the next round
  }
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
  if (w->shared != NULL) {
    w->shared[w->id] = calloc(w->round, sizeof(float));
    if (w->shared[w->id] == NULL) {
      fprintf(stderr, "memory_pass: out of memory\n");
      exit(1);
    }
  }
  for (int it = -w->warmup; it < w->iters; it++) {
    if (w->pause_ms > 0 && it == w->iters / 2) usleep((useconds_t)w->pause_ms * 1000);
    barrier_wait(w->barrier);
    double t0 = now_us();
    if (w->shared == NULL)
      add_into(dst, src, w->count);
    else
      exchange(w, src);
    barrier_wait(w->barrier);
    if (w->times != NULL && it >= 0) w->times[it] = now_us() - t0;
  }
  for (size_t i = 0; w->shared != NULL && i < w->count; i++) {
    if (src[i] != 1.0f) {
      fprintf(stderr, "memory_pass -x: thread %d holds %g at element %zu, not 1\n", w->id,
              (double)src[i], i);
      exit(1);
    }
  }
  volatile float keep = dst[w->count / 2]; /* the sums are used */
  (void)keep;
  if (w->shared != NULL) {
    free(w->shared[w->id]);
  }
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

/* --times: the passes' times in the order they ran. */
static int write_times(const char* path, size_t bytes, const double* t, int n) {
  FILE* f = fopen(path, "a");
  if (f == NULL) {
    fprintf(stderr, "memory_pass: cannot write --times file %s\n", path);
    return -1;
  }
  for (int i = 0; i < n; i++) fprintf(f, "%zu,%d,%.3f\n", bytes, i, t[i]);
  return fclose(f) == 0 ? 0 : -1;
}

static int by_value(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  size_t bytes = 0, round = 4u << 20;
  int threads = 0, iters = 100, warmup = 5, csv = 0, exchanged = 0;
  const char* times_path = NULL;
  int pause_ms = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-b") && i + 1 < argc)
      bytes = parse_size(argv[++i]);
    else if (!strcmp(argv[i], "-t") && i + 1 < argc)
      threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-n") && i + 1 < argc)
      iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-w") && i + 1 < argc)
      warmup = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--pause") && i + 1 < argc)
      pause_ms = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--times") && i + 1 < argc)
      times_path = argv[++i];
    else if (!strcmp(argv[i], "--csv"))
      csv = 1;
    else if (!strcmp(argv[i], "-x"))
      exchanged = 1;
    else if (!strcmp(argv[i], "-r") && i + 1 < argc)
      round = parse_size(argv[++i]);
    else
      bytes = 0, i = argc;
  }
  if (bytes < sizeof(float) || threads < 1 || iters < 1 || warmup < 0 || pause_ms < 0 ||
      round < sizeof(float)) {
    fprintf(
        stderr,
        "usage: memory_pass -b SIZE -t THREADS [-x [-r ROUND]] [-n ITERS] [-w WARMUP] [--csv] "
        "[--times FILE] [--pause MS]\n");
    return 2;
  }
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  barrier_t barrier = {0, 0, threads, threads > cpus ? 0 : 2000};
  double* times = calloc((size_t)iters, sizeof(double));
  worker_t* ws = calloc((size_t)threads, sizeof(worker_t));
  pthread_t* ts = calloc((size_t)threads, sizeof(pthread_t));
  float** shared = exchanged ? calloc((size_t)threads, sizeof(float*)) : NULL;
  if (times == NULL || ws == NULL || ts == NULL || (exchanged && shared == NULL)) return 1;
  for (int i = 0; i < threads; i++) {
    size_t count = bytes / sizeof(float), per_round = round / sizeof(float);
    ws[i] = (worker_t){i,        iters,
                       warmup,   threads,
                       pause_ms, count,
                       per_round < count ? per_round : count,
                       &barrier, i == 0 ? times : NULL,
                       shared};
    pthread_create(&ts[i], NULL, work, &ws[i]);
  }
  for (int i = 0; i < threads; i++) pthread_join(ts[i], NULL);
  if (times_path != NULL && write_times(times_path, bytes, times, iters) != 0) return 1;
  qsort(times, (size_t)iters, sizeof(double), by_value);
  double median = times[iters / 2], lo = times[0], hi = times[iters - 1];
  if (csv)
    printf("bytes,threads,iters,time_us,min_us,max_us\n%zu,%d,%d,%.1f,%.1f,%.1f\n", bytes, threads,
           iters, median, lo, hi);
  else
    printf("%zu bytes, %d threads, %d passes: median %.1f us (min %.1f, max %.1f)\n", bytes,
           threads, iters, median, lo, hi);
  free(shared);
  free(times);
  free(ws);
  free(ts);
  return 0;
}
