/* A worker for the reliability tests, run as `hvdsparse run -np N rel_worker MODE [ARG]`:
 *
 *   mixed STEPS   STEPS steps of the mixed workload (allreduce of four sizes, allgather,
 *                 broadcast, alltoall, reducescatter), every result checked. STEPS 0 runs until a
 *                 collective fails: the fault-injection mode. Prints "PID rank=R pid=P" before
 *                 init, "READY rank=R" after the first step, and on a failure
 *                 "FAILED rank=R t=<epoch s> step=S op=OP rc=RC: <message>", then exits 3.
 *   cycles N      N rounds of init, one step, shutdown.
 *   startup       init, one step, shutdown; an init failure is also written to
 *                 $REL_ERROR_DIR/rank<R>.txt, since the launcher that would print it may be gone.
 *
 * With REL_SAMPLE_EVERY=K, every K steps (or cycles) each rank prints
 * "MEM rank=R step=S rss_kb=X anon_kb=A shmem_kb=M fds=Y", read from /proc/self (resident memory,
 * its private anonymous part, its shared-memory part, open descriptors). REL_DELAY_RANK and REL_DELAY_MS delay
 * one rank's init (start-up tests); REL_PAUSE_MS pauses every rank after the first step. Rank 0
 * prints "STORE port=P" (the launcher's store) and, with REL_SECRET_FILE, writes the job's secret
 * to that file, never to the output (security tests). Ends with "PASS MODE rank R of N". */
#define _GNU_SOURCE
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/worker_tensors.h"
#include "hvdsparse.h"

static int rank_ = -1, size_ = 0;
static long step_;

static double wall_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A collective failed (or a result was wrong): say so in one line the driver parses, exit 3. */
static void failed(const char* op, hvds_result_t rc, const char* msg) {
  printf("FAILED rank=%d t=%.6f step=%ld op=%s rc=%s: %s\n", rank_, wall_now(), step_, op,
         hvds_result_str(rc), msg ? msg : "");
  fflush(stdout);
  exit(3);
}

static void wrong(const char* op, const char* fmt, double got, double want) {
  char msg[256];
  snprintf(msg, sizeof(msg), fmt, got, want);
  failed(op, HVDS_INTERNAL_ERROR, msg);
}

static void wait_ok(hvds_handle_t h, const char* op) {
  hvds_result_t rc = hvds_wait(h, 120000);
  if (rc != HVDS_SUCCESS) failed(op, rc, hvds_handle_error(h));
}

static void enqueue_ok(hvds_result_t rc, const char* op) {
  if (rc != HVDS_SUCCESS) failed(op, rc, hvds_last_error());
}

/* ---- memory and descriptors of this process ---- */

/* A "Name:   123 kB" field of /proc/self/status, in KiB, or -1. */
static long status_kb(const char* name) {
  FILE* f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  size_t n = strlen(name);
  while (f && fgets(line, sizeof(line), f))
    if (strncmp(line, name, n) == 0 && line[n] == ':') kb = atol(line + n + 1);
  if (f) fclose(f);
  return kb;
}

static int fd_count(void) {
  DIR* d = opendir("/proc/self/fd");
  int n = 0;
  struct dirent* e;
  while (d && (e = readdir(d)) != NULL) n += e->d_name[0] != '.';
  if (d) closedir(d);
  return n - 1; /* the directory stream's own descriptor */
}

static void sample(long every, long i) {
  if (every > 0 && i % every == 0) {
    printf("MEM rank=%d step=%ld rss_kb=%ld anon_kb=%ld shmem_kb=%ld fds=%d\n", rank_, i,
           status_kb("VmRSS"), status_kb("RssAnon"), status_kb("RssShmem"), fd_count());
    fflush(stdout);
  }
}

/* ---- the mixed workload: buffers are allocated once, so the figures show the runtime's ---- */

enum { AR_SIZES = 4, AR_MAX = 262144, AG_COLS = 4, BC_N = 1000, RS_COLS = 8, MAX_NP = 64 };
static const int kArSizes[AR_SIZES] = {1, 1000, 16384, AR_MAX};
static float* ar_buf[AR_SIZES];
static int32_t ag_in[MAX_NP * AG_COLS];
static double bc_buf[BC_N];
static int32_t a2a_in[3 * MAX_NP * 2];
static float* rs_in;

/* Rank r's allreduce element i; the sum over ranks is n(n+1)/2 + n * (i % 5 + s % 3). */
static float ar_value(int r, long i, long s) { return (float)(r + 1 + i % 5 + s % 3); }

/* The allreduces of this step: the 1 MiB one every fourth step only, to keep steps short. */
static int ar_count(long s) { return s % 4 == 3 ? AR_SIZES : AR_SIZES - 1; }

static void enqueue_allreduces(long s, hvds_handle_t* h) {
  static const char* names[AR_SIZES] = {"mix.ar.1", "mix.ar.1000", "mix.ar.16k", "mix.ar.256k"};
  for (int k = 0; k < ar_count(s); k++) {
    for (int i = 0; i < kArSizes[k]; i++) ar_buf[k][i] = ar_value(rank_, i, s);
    hvds_tensor_t t = tensor1(ar_buf[k], HVDS_FLOAT32, kArSizes[k]);
    hvds_op_options_t o = named(names[k]);
    enqueue_ok(hvds_allreduce_async(&t, &t, &o, &h[k]), "allreduce");
  }
}

static void check_allreduces(long s, hvds_handle_t* h) {
  for (int k = 0; k < ar_count(s); k++) {
    wait_ok(h[k], "allreduce");
    hvds_release(h[k]);
    int n = kArSizes[k];
    long probe[3] = {0, n / 2, n - 1};
    for (int j = 0; j < 3; j++) {
      long i = probe[j];
      double want = size_ * (size_ + 1) / 2.0 + size_ * (double)(i % 5 + s % 3);
      if (ar_buf[k][i] != want) wrong("allreduce", "element is %g, expected %g", ar_buf[k][i], want);
    }
  }
}

/* Allgather: rank r gives r + 1 rows of AG_COLS, all 100 * r + s % 7. */
static void enqueue_allgather(long s, hvds_handle_t* h) {
  for (int i = 0; i < (rank_ + 1) * AG_COLS; i++) ag_in[i] = 100 * rank_ + (int32_t)(s % 7);
  hvds_tensor_t t = {ag_in, HVDS_INT32, -1, 2, {rank_ + 1, AG_COLS}};
  hvds_op_options_t o = named("mix.ag");
  enqueue_ok(hvds_allgather_async(&t, &o, h), "allgather");
}

static void check_allgather(long s, hvds_handle_t h) {
  wait_ok(h, "allgather");
  hvds_tensor_t out;
  enqueue_ok(hvds_handle_output(h, 0, &out), "allgather output");
  if (out.shape[0] != (int64_t)size_ * (size_ + 1) / 2)
    wrong("allgather", "%g rows, expected %g", (double)out.shape[0], size_ * (size_ + 1) / 2.0);
  const int32_t* o = out.data;
  long row = 0;
  for (int r = 0; r < size_; row += r + 1, r++)
    if (o[row * AG_COLS] != 100 * r + s % 7)
      wrong("allgather", "row is %g, expected %g", o[row * AG_COLS], 100.0 * r + s % 7);
  hvds_release(h);
}

/* Broadcast from rank s % size. */
static void enqueue_broadcast(long s, hvds_handle_t* h) {
  int root = (int)(s % size_);
  for (int i = 0; i < BC_N; i++) bc_buf[i] = rank_ == root ? root * 1000.0 + i + s % 11 : -1;
  hvds_tensor_t t = tensor1(bc_buf, HVDS_FLOAT64, BC_N);
  hvds_op_options_t o = named("mix.bc");
  o.root_rank = root;
  enqueue_ok(hvds_broadcast_async(&t, &o, h), "broadcast");
}

static void check_broadcast(long s, hvds_handle_t h) {
  wait_ok(h, "broadcast");
  hvds_release(h);
  int root = (int)(s % size_);
  for (int i = 0; i < BC_N; i += 333)
    if (bc_buf[i] != root * 1000.0 + i + s % 11)
      wrong("broadcast", "element is %g, expected %g", bc_buf[i], root * 1000.0 + i + s % 11);
}

/* Alltoall: rank r sends (r + k + s) % 3 rows of 2 to rank k, each holding 100 * r + k. */
static int32_t a2a_splits[MAX_NP];

static void enqueue_alltoall(long s, hvds_handle_t* h) {
  int rows = 0;
  for (int k = 0; k < size_; k++) {
    a2a_splits[k] = (int32_t)((rank_ + k + s) % 3);
    for (int j = 0; j < a2a_splits[k]; j++, rows++) a2a_in[rows * 2] = a2a_in[rows * 2 + 1] = 100 * rank_ + k;
  }
  hvds_tensor_t t = {a2a_in, HVDS_INT32, -1, 2, {rows, 2}};
  hvds_op_options_t o = named("mix.a2a");
  o.splits = a2a_splits;
  o.nsplits = size_;
  enqueue_ok(hvds_alltoall_async(&t, &o, h), "alltoall");
}

static void check_alltoall(long s, hvds_handle_t h) {
  wait_ok(h, "alltoall");
  hvds_tensor_t out;
  enqueue_ok(hvds_handle_output(h, 0, &out), "alltoall output");
  const int32_t* rs;
  if (hvds_handle_splits(h, &rs) != size_) wrong("alltoall", "%g splits, expected %g", 0, size_);
  const int32_t* o = out.data;
  int row = 0;
  for (int r = 0; r < size_; r++) {
    if (rs[r] != (r + rank_ + s) % 3) wrong("alltoall", "split %g, expected %g", rs[r], (r + rank_ + s) % 3);
    for (int j = 0; j < rs[r]; j++, row++)
      if (o[row * 2] != 100 * r + rank_) wrong("alltoall", "row is %g, expected %g", o[row * 2], 100 * r + rank_);
  }
  hvds_release(h);
}

/* Reducescatter of 2 * size + 1 rows: rank r keeps rows as Horovod splits them. */
static void enqueue_reducescatter(long s, hvds_handle_t* h) {
  int dim0 = 2 * size_ + 1;
  for (int i = 0; i < dim0 * RS_COLS; i++) rs_in[i] = (float)(i + rank_ + s % 5);
  hvds_tensor_t t = {rs_in, HVDS_FLOAT32, -1, 2, {dim0, RS_COLS}};
  hvds_op_options_t o = named("mix.rs");
  enqueue_ok(hvds_reducescatter_async(&t, &o, h), "reducescatter");
}

static void check_reducescatter(long s, hvds_handle_t h) {
  wait_ok(h, "reducescatter");
  hvds_tensor_t out;
  enqueue_ok(hvds_handle_output(h, 0, &out), "reducescatter output");
  int dim0 = 2 * size_ + 1, first = 0;
  for (int r = 0; r < rank_; r++) first += dim0 / size_ + (r < dim0 % size_);
  const float* o = out.data;
  double want = size_ * (double)(first * RS_COLS + s % 5) + size_ * (size_ - 1) / 2.0;
  if (o[0] != want) wrong("reducescatter", "element is %g, expected %g", o[0], want);
  hvds_release(h);
}

/* One step. Even steps enqueue everything before waiting (it travels fused), odd steps wait for
 * each collective before the next. */
static void mixed_step(long s) {
  hvds_handle_t ar[AR_SIZES], ag, bc, a2a, rs;
  step_ = s;
  if (s % 2 == 0) {
    enqueue_allreduces(s, ar);
    enqueue_allgather(s, &ag);
    enqueue_broadcast(s, &bc);
    enqueue_alltoall(s, &a2a);
    enqueue_reducescatter(s, &rs);
    check_allreduces(s, ar);
    check_allgather(s, ag);
    check_broadcast(s, bc);
    check_alltoall(s, a2a);
    check_reducescatter(s, rs);
  } else {
    enqueue_allreduces(s, ar);
    check_allreduces(s, ar);
    enqueue_allgather(s, &ag);
    check_allgather(s, ag);
    enqueue_broadcast(s, &bc);
    check_broadcast(s, bc);
    enqueue_alltoall(s, &a2a);
    check_alltoall(s, a2a);
    enqueue_reducescatter(s, &rs);
    check_reducescatter(s, rs);
  }
}

static void init_or_fail(void) {
  hvds_result_t rc = hvds_init();
  if (rc != HVDS_SUCCESS) failed("init", rc, hvds_last_error());
  rank_ = hvds_rank();
  size_ = hvds_size();
  if (size_ > MAX_NP) failed("init", HVDS_INVALID_ARGUMENT, "more ranks than the worker handles");
}

/* Rank 0: where the store is, and the secret into a file for the test to look for. */
static void note_store(void) {
  const char* port = getenv("HVDSPARSE_GLOO_RENDEZVOUS_PORT");
  const char* secret_file = getenv("REL_SECRET_FILE");
  const char* secret = getenv("HVDSPARSE_SECRET");
  if (rank_ != 0) return;
  printf("STORE port=%s\n", port ? port : "?");
  fflush(stdout);
  FILE* f = secret_file && secret ? fopen(secret_file, "w") : NULL;
  if (f) {
    fputs(secret, f);
    fclose(f);
  }
}

static void run_mixed(long steps, long every) {
  init_or_fail();
  note_store();
  for (long s = 0; steps == 0 || s < steps; s++) {
    mixed_step(s);
    if (s == 0) {
      printf("READY rank=%d\n", rank_);
      fflush(stdout);
      const char* pause = getenv("REL_PAUSE_MS");
      if (pause) usleep((useconds_t)atoi(pause) * 1000);
    }
    sample(every, s + 1);
  }
}

static void run_cycles(long n, long every) {
  for (long c = 0; c < n; c++) {
    init_or_fail();
    mixed_step(c);
    hvds_result_t rc = hvds_shutdown();
    if (rc != HVDS_SUCCESS) failed("shutdown", rc, hvds_last_error());
    sample(every, c + 1);
  }
  init_or_fail(); /* main() shuts down */
}

/* Init with the error also kept in a file: the launcher that prints our output may be dead. */
static void run_startup(void) {
  const char* delay_rank = getenv("REL_DELAY_RANK");
  const char* delay_ms = getenv("REL_DELAY_MS");
  const char* env_rank = getenv("HVDSPARSE_RANK");
  if (env_rank == NULL) env_rank = getenv("RANK");
  int my = env_rank ? atoi(env_rank) : 0;
  if (delay_rank && delay_ms && atoi(delay_rank) == my) usleep((useconds_t)atoi(delay_ms) * 1000);
  double t0 = wall_now();
  hvds_result_t rc = hvds_init();
  if (rc != HVDS_SUCCESS) {
    const char* dir = getenv("REL_ERROR_DIR");
    if (dir) {
      char path[512];
      snprintf(path, sizeof(path), "%s/rank%d.txt", dir, my);
      FILE* f = fopen(path, "w");
      if (f) {
        fprintf(f, "%s\nafter %.2f s: %s\n", hvds_result_str(rc), wall_now() - t0, hvds_last_error());
        fclose(f);
      }
    }
    rank_ = my;
    failed("init", rc, hvds_last_error());
  }
  rank_ = hvds_rank();
  size_ = hvds_size();
  mixed_step(0);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: rel_worker mixed STEPS | cycles N | startup\n");
    return 2;
  }
  /* Start-up tests kill the launcher that reads our output: writes must fail, not kill us. */
  signal(SIGPIPE, SIG_IGN);
  const char* mode = argv[1];
  long arg = argc > 2 ? atol(argv[2]) : 0;
  const char* ev = getenv("REL_SAMPLE_EVERY");
  long every = ev ? atol(ev) : 0;
  const char* env_rank = getenv("HVDSPARSE_RANK");
  printf("PID rank=%s pid=%d\n", env_rank ? env_rank : "?", (int)getpid());
  fflush(stdout);
  for (int k = 0; k < AR_SIZES; k++) ar_buf[k] = malloc(sizeof(float) * (size_t)kArSizes[k]);
  rs_in = malloc(sizeof(float) * (2 * MAX_NP + 1) * RS_COLS);
  if (strcmp(mode, "mixed") == 0) {
    run_mixed(arg, every);
  } else if (strcmp(mode, "cycles") == 0) {
    run_cycles(arg, every);
  } else if (strcmp(mode, "startup") == 0) {
    run_startup();
  } else {
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  hvds_result_t rc = hvds_shutdown();
  if (rc != HVDS_SUCCESS) failed("shutdown", rc, hvds_last_error());
  printf("PASS %s rank %d of %d\n", mode, rank_, size_);
  for (int k = 0; k < AR_SIZES; k++) free(ar_buf[k]);
  free(rs_in);
  return 0;
}
