/* How long one cache line takes to go between two CPUs and back, sampled over time: on a
 * virtual machine the host can move the virtual CPUs between cores that share a cache and
 * cores that do not, and every shared-memory collective (ours and Open MPI's) follows.
 *
 *   core_pingpong [SAMPLES [INTERVAL_MS [CPU_A CPU_B]]]   (defaults 30, 500, 0 1)
 *
 * Prints one round-trip time per sample (ns, the mean of 100000 round trips), then the
 * median, min and max. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define TRIPS 100000

static _Atomic int ball __attribute__((aligned(64)));
static _Atomic int stop;

static int pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  return pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

/* The far side: returns the ball (1 -> 0) until told to stop. */
static void* far_side(void* arg) {
  pin(*(int*)arg);
  while (!atomic_load(&stop))
    if (atomic_load_explicit(&ball, memory_order_acquire) == 1)
      atomic_store_explicit(&ball, 0, memory_order_release);
  return NULL;
}

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static int by_value(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  int samples = argc > 1 ? atoi(argv[1]) : 30;
  int interval_ms = argc > 2 ? atoi(argv[2]) : 500;
  int cpu_a = argc > 3 ? atoi(argv[3]) : 0, cpu_b = argc > 4 ? atoi(argv[4]) : 1;
  if (samples < 1 || interval_ms < 0 || pin(cpu_a) != 0) {
    fprintf(stderr, "usage: core_pingpong [SAMPLES [INTERVAL_MS [CPU_A CPU_B]]] (CPUs this "
                    "process may use)\n");
    return 2;
  }
  pthread_t t;
  if (pthread_create(&t, NULL, far_side, &cpu_b) != 0) return 1;
  double* ns = calloc((size_t)samples, sizeof *ns);
  for (int i = 0; i < samples && ns != NULL; i++) {
    double start = now_ns();
    for (int k = 0; k < TRIPS; k++) {
      atomic_store_explicit(&ball, 1, memory_order_release);
      while (atomic_load_explicit(&ball, memory_order_acquire) != 0) {
      }
    }
    ns[i] = (now_ns() - start) / TRIPS;
    printf("sample %d: %.1f ns round trip, CPU %d <-> %d\n", i + 1, ns[i], cpu_a, cpu_b);
    fflush(stdout);
    struct timespec pause = {interval_ms / 1000, (long)(interval_ms % 1000) * 1000000L};
    nanosleep(&pause, NULL);
  }
  atomic_store(&stop, 1);
  pthread_join(t, NULL);
  if (ns == NULL) return 1;
  qsort(ns, (size_t)samples, sizeof *ns, by_value);
  printf("median %.1f ns, min %.1f, max %.1f (max/min %.2f) over %d samples\n", ns[samples / 2],
         ns[0], ns[samples - 1], ns[samples - 1] / ns[0], samples);
  free(ns);
  return 0;
}
