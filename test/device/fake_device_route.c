/* The fake device library's NCCL route (device_api.h) for ranks that are threads of one
 * process: a communicator is one group object that rank 0 makes and hands to the others through
 * the runtime's broadcast; the k-th collective of every rank forms round k, which the
 * group's own completion thread reduces (float32 and float64, in the fake GPU memory) and
 * completes by calling every rank's done, as NCCL's stream and the backend's completion thread
 * would. A failure injected on one GPU fails the round on every rank, as an aborted
 * communicator does. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_device_internal.h"

enum { kMaxRanks = 16, kMaxRounds = 256 };

enum { kAllreduce, kAllgather, kReducescatter, kBroadcast, kAlltoall };

/* One rank's part of a round. Allreduce: n tensors of counts[i] elements. The others: one input
 * and one output (in_copy[0], out_copy[0]); counts[r] the bytes (allgather) or elements
 * (reducescatter) of rank r's block; broadcast: counts[0] bytes from rank op; alltoall:
 * counts[r] the bytes to rank r, counts[size + r] the bytes from rank r. */
typedef struct {
  int kind;
  size_t* counts;
  const void** in_copy;
  void** out_copy;
  int n, dtype, op, device;
  double prescale, postscale;
  hvds_device_done_fn done;
  void* arg;
  struct comm* then; /* a pair's first stage: the result goes on to a round of this comm */
  int divide;        /* Average's divisor when not the group's size (a pair's second stage) */
  double then_postscale;
  int then_op;
} call_t;

typedef struct {
  int size;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t thread;
  int users;                           /* ranks that have not destroyed it */
  long submitted[kMaxRanks];           /* rounds each rank submitted */
  long completed;                      /* rounds completed */
  call_t calls[kMaxRounds][kMaxRanks]; /* round k at k % kMaxRounds */
  int stop;
} group_t;

typedef struct comm {
  group_t* group;
  int rank;
  struct comm* cross;    /* a pair (comm_pair): the cross part; group and rank the local's */
  struct comm* parts[2]; /* a pair's local and cross parts */
} comm_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int held;             /* rounds wait while set (fake_device_hold) */
static int fail_device = -2; /* the GPU whose allreduces fail (fake_device_fail_route) */
static fake_route_stats_t stats;

static int contexts[64];

void* fake_route_context(int device, int timeout_ms, char* why, size_t why_len) {
  (void)timeout_ms;
  if (device < 0 || device >= 64) {
    snprintf(why, why_len, "fake: no GPU %d", device);
    return NULL;
  }
  return &contexts[device];
}

static double load(const void* p, int dtype) {
  return dtype == HVDS_FLOAT64 ? *(const double*)p : (double)*(const float*)p;
}

static void store(void* p, int dtype, double v) {
  if (dtype == HVDS_FLOAT64)
    *(double*)p = v;
  else
    *(float*)p = (float)v;
}

/* Round k of g: every rank's tensors reduced in double, written to every rank's outputs. */
static void reduce_round(group_t* g, call_t* calls) {
  int dtype = calls[0].dtype;
  size_t esz = dtype == HVDS_FLOAT64 ? 8 : 4;
  for (int t = 0; t < calls[0].n; t++) {
    size_t count = calls[0].counts[t];
    double* sum = calloc(count ? count : 1, sizeof(double));
    char* buf = malloc(count * esz + 1);
    for (int r = 0; r < g->size; r++) {
      if (calls[r].in_copy[t] == NULL) continue;  // a joined rank: zeros
      fake_device_read_memory(buf, calls[r].in_copy[t], count * esz);
      for (size_t i = 0; i < count; i++) sum[i] += load(buf + i * esz, dtype) * calls[r].prescale;
    }
    for (int r = 0; r < g->size; r++) {
      if (calls[r].out_copy[t] == NULL) continue;
      int divide = calls[r].divide ? calls[r].divide : g->size;
      double f = calls[r].postscale / (calls[r].op == HVDS_AVERAGE ? divide : 1);
      for (size_t i = 0; i < count; i++) store(buf + i * esz, dtype, sum[i] * f);
      fake_device_write_memory(calls[r].out_copy[t], buf, count * esz);
    }
    free(sum);
    free(buf);
  }
}

/* Every rank's input block into every rank's output, in rank order. */
static void gather_round(group_t* g, call_t* calls) {
  for (int r = 0; r < g->size; r++) {
    if (calls[r].out_copy[0] == NULL) continue;
    size_t off = 0;
    for (int q = 0; q < g->size; q++) {
      size_t bytes = calls[0].counts[q];
      char* buf = malloc(bytes + 1);
      fake_device_read_memory(buf, calls[q].in_copy[0], bytes);
      fake_device_write_memory((char*)calls[r].out_copy[0] + off, buf, bytes);
      free(buf);
      off += bytes;
    }
  }
}

/* Rank r's block of every rank's input, reduced in double into rank r's output. */
static void scatter_round(group_t* g, call_t* calls) {
  int dtype = calls[0].dtype;
  size_t esz = dtype == HVDS_FLOAT64 ? 8 : 4, off = 0;
  for (int r = 0; r < g->size; off += calls[0].counts[r], r++) {
    size_t count = calls[0].counts[r];
    if (calls[r].out_copy[0] == NULL || count == 0) continue;
    double* sum = calloc(count, sizeof(double));
    char* buf = malloc(count * esz);
    for (int q = 0; q < g->size; q++) {
      fake_device_read_memory(buf, (const char*)calls[q].in_copy[0] + off * esz, count * esz);
      for (size_t i = 0; i < count; i++) sum[i] += load(buf + i * esz, dtype) * calls[q].prescale;
    }
    double f = calls[r].postscale / (calls[r].op == HVDS_AVERAGE ? g->size : 1);
    for (size_t i = 0; i < count; i++) store(buf + i * esz, dtype, sum[i] * f);
    fake_device_write_memory(calls[r].out_copy[0], buf, count * esz);
    free(sum);
    free(buf);
  }
}

/* The root's bytes into every other rank's buffer. */
static void broadcast_round(group_t* g, call_t* calls) {
  int root = calls[0].op;
  size_t bytes = calls[0].counts[0];
  char* buf = malloc(bytes + 1);
  fake_device_read_memory(buf, calls[root].in_copy[0], bytes);
  for (int r = 0; r < g->size; r++)
    if (r != root) fake_device_write_memory(calls[r].out_copy[0], buf, bytes);
  free(buf);
}

/* Rank q's block for rank r into rank r's output, at the place of q's block. */
static void alltoall_round(group_t* g, call_t* calls) {
  int n = g->size;
  for (int r = 0; r < n; r++) {
    size_t at = 0;
    for (int q = 0; q < n; at += calls[r].counts[n + q], q++) {
      size_t from = 0, bytes = calls[q].counts[r];
      for (int k = 0; k < r; k++) from += calls[q].counts[k];
      if (calls[r].out_copy[0] == NULL || bytes == 0) continue;
      char* buf = malloc(bytes);
      fake_device_read_memory(buf, (const char*)calls[q].in_copy[0] + from, bytes);
      fake_device_write_memory((char*)calls[r].out_copy[0] + at, buf, bytes);
      free(buf);
    }
  }
}

static void enqueue(comm_t* c, const call_t* call);

/* A pair's second stage: c's outputs (its host's sums) reduced over the cross group into the
 * same outputs, with the operation's own postscale and Average over every rank. */
static void then_cross(const call_t* c) {
  comm_t* cross = c->then;
  call_t next = *c;
  next.then = NULL;
  next.prescale = 1.0;
  next.postscale = c->then_postscale;
  next.op = c->then_op;
  next.divide = c->divide;
  next.counts = malloc((size_t)c->n * sizeof(size_t));
  next.in_copy = malloc((size_t)c->n * sizeof(void*));
  next.out_copy = malloc((size_t)c->n * sizeof(void*));
  memcpy(next.counts, c->counts, (size_t)c->n * sizeof(size_t));
  memcpy(next.in_copy, c->out_copy, (size_t)c->n * sizeof(void*));
  memcpy(next.out_copy, c->out_copy, (size_t)c->n * sizeof(void*));
  enqueue(cross, &next);
}

static void* completion_thread(void* arg) {
  group_t* g = arg;
  pthread_mutex_lock(&g->mu);
  for (;;) {
    int ready = !g->stop;
    for (int r = 0; r < g->size && ready; r++) ready = g->submitted[r] > g->completed;
    pthread_mutex_lock(&mu);
    ready = ready && !held;
    pthread_mutex_unlock(&mu);
    if (g->stop) break;
    if (!ready) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_nsec += 1000000;
      if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
      pthread_cond_timedwait(&g->cv, &g->mu, &ts);  // also sees fake_device_hold's release
      continue;
    }
    call_t* calls = g->calls[g->completed % kMaxRounds];
    int failed_rank = -1;
    for (int r = 0; r < g->size; r++)
      if (calls[r].device == fail_device) failed_rank = r;
    pthread_mutex_unlock(&g->mu);
    char message[256];
    if (failed_rank < 0 && calls[0].kind == kAllgather)
      gather_round(g, calls);
    else if (failed_rank < 0 && calls[0].kind == kReducescatter)
      scatter_round(g, calls);
    else if (failed_rank < 0 && calls[0].kind == kBroadcast)
      broadcast_round(g, calls);
    else if (failed_rank < 0 && calls[0].kind == kAlltoall)
      alltoall_round(g, calls);
    else if (failed_rank < 0)
      reduce_round(g, calls);
    else
      snprintf(message, sizeof(message),
               "fake NCCL: unhandled cuda error (injected) on "
               "rank %d of the communicator; it was aborted",
               failed_rank);
    for (int r = 0; r < g->size; r++) {
      call_t* c = &calls[r];
      if (c->then != NULL && failed_rank < 0)
        then_cross(c);  // the host's sums go on to the hosts' round
      else
        c->done(c->arg, failed_rank < 0 ? 0 : HVDS_SYSTEM_ERROR, failed_rank < 0 ? NULL : message);
      free(c->counts);
      free(c->in_copy);
      free(c->out_copy);
    }
    pthread_mutex_lock(&mu);
    stats.rounds++;
    pthread_mutex_unlock(&mu);
    pthread_mutex_lock(&g->mu);
    g->completed++;
    pthread_cond_broadcast(&g->cv);
  }
  pthread_mutex_unlock(&g->mu);
  return NULL;
}

void* fake_route_comm_create(void* context, int rank, int size, hvds_device_bcast_fn bcast,
                             void* bctx, char* why, size_t why_len) {
  (void)context;
  group_t* g = NULL;
  if (rank == 0) {
    g = calloc(1, sizeof(*g));
    g->size = size;
    g->users = size;
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    pthread_create(&g->thread, NULL, completion_thread, g);
  }
  if (size > kMaxRanks || bcast(bctx, &g, sizeof(g), 0) != 0) {
    snprintf(why, why_len, "fake: the group did not reach every rank");
    return NULL;
  }
  comm_t* c = calloc(1, sizeof(*c));
  c->group = g;
  c->rank = rank;
  pthread_mutex_lock(&mu);
  stats.comms++;
  pthread_mutex_unlock(&mu);
  return c;
}

void fake_route_comm_destroy(void* comm) {
  comm_t* c = comm;
  if (c->cross != NULL) {  // a pair: its parts, the host's rounds first (they feed the cross)
    fake_route_comm_destroy(c->parts[0]);
    fake_route_comm_destroy(c->parts[1]);
    free(c);
    return;
  }
  group_t* g = c->group;
  pthread_mutex_lock(&g->mu);
  while (g->completed < g->submitted[c->rank]) pthread_cond_wait(&g->cv, &g->mu);
  int last = --g->users == 0;
  if (last) g->stop = 1;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
  if (last) {
    pthread_join(g->thread, NULL);
    free(g);
  }
  free(c);
  pthread_mutex_lock(&mu);
  stats.comms--;
  pthread_mutex_unlock(&mu);
}

void* fake_route_ready_event(int device, int64_t stream, char* why, size_t why_len) {
  (void)why, (void)why_len, (void)device;
  fake_event_t* ev = calloc(1, sizeof(*ev));
  ev->stream = stream;
  pthread_mutex_lock(&mu);
  stats.events++;
  stats.last_event_stream = stream;
  pthread_mutex_unlock(&mu);
  return ev;
}

void fake_route_event_free(void* event) {
  fake_event_settle(event);
  pthread_mutex_lock(&mu);
  stats.events--;
  pthread_mutex_unlock(&mu);
  free(event);
}

/* Queues this rank's part of its next round. */
static void enqueue(comm_t* c, const call_t* call) {
  group_t* g = c->group;
  pthread_mutex_lock(&g->mu);
  g->calls[g->submitted[c->rank] % kMaxRounds][c->rank] = *call;
  g->submitted[c->rank]++;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
}

static void submit(comm_t* c, const call_t* call, void* const* ready, int nready) {
  pthread_mutex_lock(&mu);
  stats.calls++;
  stats.last_call_tensors = call->n;
  stats.last_call_ready_events = nready;
  stats.last_ready_stream = nready > 0 ? ((fake_event_t*)ready[0])->stream : -1;
  pthread_mutex_unlock(&mu);
  enqueue(c, call);
}

static int emulated(int dtype, char* why, size_t why_len) {
  if (dtype == HVDS_FLOAT32 || dtype == HVDS_FLOAT64) return 1;
  snprintf(why, why_len, "fake NCCL: dtype %d is not emulated", dtype);
  return 0;
}

/* A call of one input and one output with the group's per-rank counts. */
static call_t single(comm_t* c, int kind, const void* input, void* output, const size_t* counts,
                     int dtype, int op, double prescale, double postscale, hvds_device_done_fn done,
                     void* done_arg) {
  int size = c->group->size;
  call_t call = {kind,
                 malloc((size_t)size * sizeof(size_t)),
                 malloc(sizeof(void*)),
                 malloc(sizeof(void*)),
                 1,
                 dtype,
                 op,
                 fake_device_of(input),
                 prescale,
                 postscale,
                 done,
                 done_arg,
                 NULL,
                 0,
                 0.0,
                 0};
  memcpy(call.counts, counts, (size_t)size * sizeof(size_t));
  call.in_copy[0] = input;
  call.out_copy[0] = output;
  return call;
}

int fake_route_allreduce(void* comm, const void* const* inputs, void* const* outputs,
                         const size_t* counts, int n, int dtype, int op, double prescale,
                         double postscale, void* const* ready, int nready, hvds_device_done_fn done,
                         void* done_arg, char* why, size_t why_len) {
  if (!emulated(dtype, why, why_len)) return -1;
  int device = -1;
  for (int i = 0; i < n && device < 0; i++)
    if (inputs[i] != NULL) device = fake_device_of(inputs[i]);
  call_t call = {kAllreduce,
                 malloc((size_t)n * sizeof(size_t)),
                 malloc((size_t)n * sizeof(void*)),
                 malloc((size_t)n * sizeof(void*)),
                 n,
                 dtype,
                 op,
                 device,
                 prescale,
                 postscale,
                 done,
                 done_arg,
                 NULL,
                 0,
                 0.0,
                 0};
  memcpy(call.counts, counts, (size_t)n * sizeof(size_t));
  memcpy(call.in_copy, inputs, (size_t)n * sizeof(void*));
  memcpy(call.out_copy, outputs, (size_t)n * sizeof(void*));
  comm_t* c = comm;
  if (c->cross != NULL) {  // a pair: the host's sum first, then the hosts' round
    call.then = c->cross;
    call.then_op = op;
    call.then_postscale = postscale;
    call.divide = c->group->size * c->cross->group->size;
    call.op = HVDS_SUM;
    call.postscale = 1.0;
    pthread_mutex_lock(&mu);
    stats.pair_calls++;
    pthread_mutex_unlock(&mu);
  }
  submit(c, &call, ready, nready);
  return 0;
}

void* fake_route_comm_pair(void* local, void* cross, char* why, size_t why_len) {
  (void)why, (void)why_len;
  comm_t* c = calloc(1, sizeof(*c));
  *c = *(comm_t*)local;
  c->cross = cross;
  c->parts[0] = local;
  c->parts[1] = cross;
  return c;
}

int fake_route_allgather(void* comm, const void* input, void* output, const size_t* bytes,
                         void* const* ready, int nready, hvds_device_done_fn done, void* done_arg,
                         char* why, size_t why_len) {
  (void)why, (void)why_len;
  call_t call =
      single(comm, kAllgather, input, output, bytes, HVDS_UINT8, 0, 1.0, 1.0, done, done_arg);
  submit(comm, &call, ready, nready);
  return 0;
}

int fake_route_reducescatter(void* comm, const void* input, void* output, const size_t* counts,
                             int dtype, int op, double prescale, double postscale,
                             void* const* ready, int nready, hvds_device_done_fn done,
                             void* done_arg, char* why, size_t why_len) {
  if (!emulated(dtype, why, why_len)) return -1;
  call_t call = single(comm, kReducescatter, input, output, counts, dtype, op, prescale, postscale,
                       done, done_arg);
  submit(comm, &call, ready, nready);
  return 0;
}

int fake_route_broadcast(void* comm, void* buf, size_t bytes, int root, void* const* ready,
                         int nready, hvds_device_done_fn done, void* done_arg, char* why,
                         size_t why_len) {
  (void)why, (void)why_len;
  comm_t* c = comm;
  size_t* counts = calloc((size_t)c->group->size, sizeof(size_t));
  counts[0] = bytes;
  call_t call = single(c, kBroadcast, buf, buf, counts, HVDS_UINT8, root, 1.0, 1.0, done, done_arg);
  free(counts);
  submit(c, &call, ready, nready);
  return 0;
}

int fake_route_alltoall(void* comm, const void* input, const size_t* send_bytes, void* output,
                        const size_t* recv_bytes, void* const* ready, int nready,
                        hvds_device_done_fn done, void* done_arg, char* why, size_t why_len) {
  (void)why, (void)why_len;
  comm_t* c = comm;
  int n = c->group->size;
  call_t call =
      single(c, kAlltoall, input, output, send_bytes, HVDS_UINT8, 0, 1.0, 1.0, done, done_arg);
  call.counts = realloc(call.counts, 2 * (size_t)n * sizeof(size_t));
  memcpy(call.counts + n, recv_bytes, (size_t)n * sizeof(size_t));
  submit(c, &call, ready, nready);
  return 0;
}

/* An event after this rank's rounds so far (the "GPU stream" of the communicator). */
void* fake_route_launch_event(void* comm, char* why, size_t why_len) {
  comm_t* c = comm;
  fake_event_t* ev = fake_route_ready_event(-1, -7, why, why_len);
  pthread_mutex_lock(&c->group->mu);
  ev->group = c->group;
  ev->round = c->group->submitted[c->rank];
  pthread_mutex_unlock(&c->group->mu);
  return ev;
}

int fake_route_stream_wait(void* event, int device, int64_t stream, char* why, size_t why_len) {
  (void)device, (void)why, (void)why_len;
  fake_event_t* ev = event;
  group_t* g = ev->group;
  int pending = 0;
  if (g != NULL) {
    pthread_mutex_lock(&g->mu);
    pending = g->completed < ev->round;
    pthread_mutex_unlock(&g->mu);
  }
  pthread_mutex_lock(&mu);
  stats.stream_waits++;
  stats.last_wait_stream = stream;
  stats.last_wait_pending = pending;
  pthread_mutex_unlock(&mu);
  return 0;
}

EXPORT fake_route_stats_t fake_device_route_stats(void) {
  pthread_mutex_lock(&mu);
  fake_route_stats_t s = stats;
  pthread_mutex_unlock(&mu);
  return s;
}

EXPORT void fake_device_hold(int hold) {
  pthread_mutex_lock(&mu);
  held = hold;
  pthread_mutex_unlock(&mu);
}

EXPORT void fake_device_fail_route(int device) {
  pthread_mutex_lock(&mu);
  fail_device = device;
  pthread_mutex_unlock(&mu);
}
