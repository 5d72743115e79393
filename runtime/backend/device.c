/* The device backend: GPU collectives run by the device library's NCCL route
 * (HVDSPARSE_GPU_OPERATIONS=nccl, device_route.h), first in the registry. It runs a whole
 * fused response itself: one launch on the GPU's stream, completed later from the library's
 * completion thread, so the cycle never waits for the GPU. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "collectives.h"
#include "device_completion.h"
#include "device_library.h"
#include "device_route.h"
#include "dtype.h"
#include "exec_layout.h"
#include "hierarchy.h"
#include "log.h"
#include "param.h"
#include "process_set.h"

/* One launched operation: what its completion finishes. Two references, the launch's and the
 * completion's (which may run before the launch returned): the last of the two finishes the
 * entries, so the launch still reads them (the timeline) and the cycle never waits. */
typedef struct {
  hvds_runtime_t* rt;
  const char* what;   /* "allreduce", ... */
  const char* broken; /* set: the entries fail with it even when the collective succeeds */
  atomic_int refs;
  int at_launch; /* the entries completed at launch (device_completion.h), not here */
  void* comm;
  int status;     /* the completion's */
  char text[768]; /* its failure */
  char name[128]; /* the first tensor's, for a failure after the entries completed */
  char failure[320]; /* what broken points to when it is this rank's own (an output) */
  int32_t n;
  hvds_entry_t* entries[];
} launched_t;

/* Drops n references; the last finishes the entries with the completion's outcome. */
static void unref(launched_t* op, int n) {
  if (atomic_fetch_sub(&op->refs, n) != n) return;
  for (int32_t i = 0; i < op->n && !op->at_launch; i++)
    if (op->entries[i] != NULL)
      hvds__entry_finish(op->rt, op->entries[i], (hvds_result_t)op->status,
                         op->status == HVDS_SUCCESS ? NULL : op->text);
  free(op);
}

static void completed(void* arg, int status, const char* message) {
  launched_t* op = arg;
  if (status != HVDS_SUCCESS)
    snprintf(op->text, sizeof(op->text), "NCCL %s on rank %d: %s", op->what, op->rt->rank,
             message ? message : hvds_result_str((hvds_result_t)status));
  else if (op->broken != NULL)
    snprintf(op->text, sizeof(op->text), "%s", op->broken), status = HVDS_SYSTEM_ERROR;
  op->status = status;
  if (op->at_launch && status != HVDS_SUCCESS)  // its handles are done: the log says it
    HVDS_ERROR("%s (of '%s', whose handle completed at launch: ENABLE_ASYNC_COMPLETION)", op->text,
               op->name);
  unref(op, 1);
}

/* The control plane's broadcast over the set, for NCCL's unique id. */
static int bcast_over_set(void* arg, void* buf, size_t bytes, int root) {
  hvds_pset_t* s = arg;
  hvds_coll_opts_t o = {hvds__next_tag(s), HVDS_ALGO_AUTO, 0, 0};
  return hvds__broadcast(s->comm, buf, bytes, root, &o) == HVDS_SUCCESS ? 0 : -1;
}

/* The control plane's broadcast over a view of the world (the local or cross group), with
 * the global set's tags. */
typedef struct {
  hvds_p2p_t* view;
  uint64_t tag;
} view_bcast_t;

static int bcast_over_view(void* arg, void* buf, size_t bytes, int root) {
  view_bcast_t* v = arg;
  hvds_coll_opts_t o = {v->tag, HVDS_ALGO_AUTO, 0, 0};
  return hvds__broadcast(v->view, buf, bytes, root, &o) == HVDS_SUCCESS ? 0 : -1;
}

/* This rank's GPU context, made once. */
static void* context(hvds_runtime_t* rt, const hvds_device_api_t* api, int device, char* why,
                     size_t why_len) {
  if (rt->device_context == NULL) {
    int timeout_ms = (int)(hvds__param_dbl(HVDS_PARAM_GLOO_TIMEOUT_SECONDS) * 1000.0);
    rt->device_context = api->context(device, timeout_ms, why, why_len);
    if (rt->device_context != NULL) rt->device_index = device;
  }
  return rt->device_context;
}

/* The set's communicator on this rank's GPU, made on its first routed operation (every member
 * runs the same response, so every member makes it at the same point). */
static void* set_comm(hvds_pset_t* s, const hvds_device_api_t* api, int device, char* why,
                      size_t why_len) {
  hvds_runtime_t* rt = s->rt;
  if (s->device_comm != NULL) return s->device_comm;
  if (context(rt, api, device, why, why_len) == NULL) return NULL;
  s->device_comm =
      api->comm_create(rt->device_context, s->my_rank, s->n, bcast_over_set, s, why, why_len);
  return s->device_comm;
}

/* Horovod's hierarchical allreduce on GPUs: the global set's allreduces when
 * HOROVOD_HIERARCHICAL_ALLREDUCE=1 chose it at init (several hosts of as many ranks). */
static int hierarchical(const hvds_pset_t* s, const hvds_response_t* r) {
  return s->id == 0 && r->type == HVDS_MSG_ALLREDUCE && s->rt->hier_mode == HVDS_HIER_ALWAYS;
}

/* The pair of this host's and the cross group's communicators, made on the first
 * hierarchical allreduce (every rank at the same point: the local ones, then the cross). */
static void* hier_comm(hvds_pset_t* s, const hvds_device_api_t* api, int device, char* why,
                       size_t why_len) {
  hvds_runtime_t* rt = s->rt;
  if (rt->device_hier_comm != NULL) return rt->device_hier_comm;
  if (context(rt, api, device, why, why_len) == NULL) return NULL;
  view_bcast_t lv = {rt->local, hvds__next_tag(s)}, cv = {rt->cross, hvds__next_tag(s)};
  void* local = api->comm_create(rt->device_context, rt->local->rank, rt->local->size,
                                 bcast_over_view, &lv, why, why_len);
  void* cross = local ? api->comm_create(rt->device_context, rt->cross->rank, rt->cross->size,
                                         bcast_over_view, &cv, why, why_len)
                      : NULL;
  rt->device_hier_comm = cross ? api->comm_pair(local, cross, why, why_len) : NULL;
  if (rt->device_hier_comm == NULL) {
    if (local != NULL) api->comm_destroy(local);
    if (cross != NULL) api->comm_destroy(cross);
  }
  return rt->device_hier_comm;
}

/* Fails every entry of x with message. */
static void fail_all(hvds_runtime_t* rt, hvds_exec_t* x, const char* message) {
  for (int32_t i = 0; i < x->n; i++)
    if (x->entries[i] != NULL) {
      hvds__entry_finish(rt, x->entries[i], HVDS_SYSTEM_ERROR, message);
      x->entries[i] = NULL;
    }
}

/* The library and the set's communicator for r, and the record its completion finishes (x's
 * entries); NULL after failing x's entries with the reason. */
static launched_t* prepare(hvds_pset_t* s, hvds_response_t* r, hvds_exec_t* x, const char* what,
                           const hvds_device_api_t** api, void** comm) {
  hvds_runtime_t* rt = s->rt;
  char why[512] = "", message[768];
  *api = hvds__device_library(why, sizeof(why), NULL, 0);
  int device = rt->device_context != NULL ? rt->device_index : -1;
  for (int32_t i = 0; i < x->n && device < 0; i++)
    if (x->entries[i] != NULL) device = x->entries[i]->input.device;
  *comm = NULL;
  if (*api == NULL)
    snprintf(why, sizeof(why), "no device library");
  else if (device < 0)
    snprintf(why, sizeof(why),
             "this rank joined before it ran any GPU operation, so it has no "
             "GPU to contribute zeros on");
  else if (hierarchical(s, r))
    *comm = hier_comm(s, *api, device, why, sizeof(why));
  else
    *comm = set_comm(s, *api, device, why, sizeof(why));
  launched_t* op = *comm ? malloc(sizeof(*op) + (size_t)x->n * sizeof(hvds_entry_t*)) : NULL;
  if (*comm != NULL && op == NULL) snprintf(why, sizeof(why), "out of memory");
  if (op == NULL) {
    snprintf(message, sizeof(message), "NCCL %s of '%s' on rank %d: %s", what, r->names[0],
             rt->rank, why);
    fail_all(rt, x, message);
    return NULL;  // the other ranks fail in the collective, or time out
  }
  *op = (launched_t){.rt = rt,
                     .what = what,
                     .at_launch = hvds__device_async_completion(),
                     .comm = *comm,
                     .n = x->n};
  atomic_init(&op->refs, 2);
  snprintf(op->name, sizeof(op->name), "%s", r->names[0]);
  memcpy(op->entries, x->entries, (size_t)x->n * sizeof(hvds_entry_t*));
  return op;
}

/* A caller's allocator that gave no output: this rank still takes part (in the library's
 * scratch) so the others get their results, and its entry fails naming itself. */
static void output_failed(launched_t* op, const hvds_entry_t* e, size_t bytes) {
  snprintf(op->failure, sizeof(op->failure),
           "%s '%s' on rank %d: the output allocator returned NULL for %zu bytes on GPU %d",
           op->what, e->name, op->rt->rank, bytes, (int)e->input.device);
  op->broken = op->failure;
}

/* Completion at launch: each entry's handle gets an event of the work launched so far. */
static void complete_at_launch(hvds_pset_t* s, hvds_exec_t* x, const launched_t* op) {
  for (int32_t i = 0; i < x->n; i++) {
    if (x->entries[i] == NULL) continue;
    char why[512] = "", message[768] = "";
    if (op->broken != NULL)
      snprintf(message, sizeof(message), "%s", op->broken);
    else if (hvds__device_handle_work(s->rt, x->entries[i], op->comm, why, sizeof(why)) != 0)
      snprintf(message, sizeof(message), "NCCL %s of '%s' on rank %d: %s", op->what,
               x->entries[i]->name, s->rt->rank, why);
    hvds__entry_finish(s->rt, x->entries[i], message[0] ? HVDS_SYSTEM_ERROR : HVDS_SUCCESS,
                       message[0] ? message : NULL);
  }
}

/* After the library was called: x's entries finish with the completion (at launch under
 * ENABLE_ASYNC_COMPLETION), or fail here with why. */
static hvds_result_t launched(hvds_pset_t* s, hvds_response_t* r, hvds_exec_t* x, launched_t* op,
                              int rc, const char* why) {
  if (rc != 0) {
    char message[768];
    snprintf(message, sizeof(message), "NCCL %s of '%s' on rank %d: %s", op->what, r->names[0],
             s->rt->rank, why);
    free(op);  // done is never called
    fail_all(s->rt, x, message);
    return HVDS_SUCCESS;
  }
  hvds__tl_end(s->rt, r, x);
  if (op->at_launch) complete_at_launch(s, x, op);
  for (int32_t i = 0; i < x->n; i++) x->entries[i] = NULL;  // finished, or the completion's
  unref(op, 1);
  return HVDS_SUCCESS;
}

static hvds_result_t run_allreduce(hvds_pset_t* s, hvds_response_t* r, hvds_exec_t* x) {
  const hvds_device_api_t* api;
  void* comm;
  launched_t* op = prepare(s, r, x, "allreduce", &api, &comm);
  if (op == NULL) return HVDS_SUCCESS;
  char why[512] = "";
  size_t* counts = malloc((size_t)x->n * (sizeof(size_t) + 3 * sizeof(void*)));
  if (counts == NULL) return launched(s, r, x, op, -1, "out of memory");
  const void** inputs = (const void**)(counts + x->n);
  void** outputs = (void**)(inputs + x->n);
  void** ready = outputs + x->n;
  int nready = 0;
  for (int32_t i = 0; i < x->n; i++) {
    hvds_entry_t* e = x->entries[i];
    counts[i] = (size_t)r->sizes[i];
    inputs[i] = e ? e->input.data : NULL;
    outputs[i] = e ? e->output.data : NULL;
    if (e && e->ready_event) ready[nready++] = e->ready_event;
  }
  hvds__tl_activity(s->rt, r, "NCCL_ALLREDUCE");
  int rc = api->allreduce(comm, (const void* const*)inputs, outputs, counts, x->n, r->dtype,
                          r->reduce_op, r->prescale, r->postscale, ready, nready, completed, op,
                          why, sizeof(why));
  hvds__tl_activity(s->rt, r, NULL);
  free(counts);
  return launched(s, r, x, op, rc, why);
}

/* A one-tensor launch (all but allreduce): the library, the set's communicator, the record its
 * completion finishes, the entry and its ready event. */
typedef struct {
  const hvds_device_api_t* api;
  void* comm;
  launched_t* op;
  hvds_entry_t* e;
  void* ready[1];
  int nready;
  char why[512];
} one_t;

/* prepare() for a response of one tensor; 0 also where this rank sits it out, as on the CPU
 * path: a rank without the tensor (joined). Starts the timeline's record. */
static int prepare_one(hvds_pset_t* s, hvds_response_t* r, hvds_exec_t* x, const char* what,
                       one_t* o) {
  o->e = x->entries[0];
  o->op = o->e != NULL ? prepare(s, r, x, what, &o->api, &o->comm) : NULL;
  if (o->op == NULL) return 0;
  o->ready[0] = o->e->ready_event;
  o->nready = o->e->ready_event != NULL;
  o->why[0] = '\0';
  hvds__tl_start(s->rt, r, NULL);
  return 1;
}

static hvds_result_t run_allgather(hvds_pset_t* s, hvds_response_t* r, hvds_exec_t* x) {
  one_t o;
  if (!prepare_one(s, r, x, "allgather", &o)) return HVDS_SUCCESS;
  size_t row = hvds__row_elems(r) * hvds__dtype_bytes((hvds_dtype_t)r->dtype);
  size_t* bytes = calloc((size_t)s->n, sizeof(size_t));
  if (bytes == NULL) return launched(s, r, x, o.op, -1, "out of memory");
  int64_t rows = 0, shape[HVDS_MAX_DIMS];
  for (int32_t k = 0; k < s->n; k++) {
    bytes[k] = (size_t)r->sizes[k] * row;
    rows += r->sizes[k];
  }
  hvds__out_shape(r, rows, shape);
  void* out = hvds__entry_alloc_output(o.e, r->nextra, shape, (size_t)rows * row);
  if (out == NULL) output_failed(o.op, o.e, (size_t)rows * row);
  hvds__tl_activity(s->rt, r, "NCCL_ALLGATHER");
  int rc = o.api->allgather(o.comm, o.e->input.data, out, bytes, o.ready, o.nready, completed, o.op,
                            o.why, sizeof(o.why));
  hvds__tl_activity(s->rt, r, NULL);
  free(bytes);
  return launched(s, r, x, o.op, rc, o.why);
}

static hvds_result_t run_reducescatter(hvds_pset_t* s, hvds_response_t* r, hvds_exec_t* x) {
  one_t o;
  if (!prepare_one(s, r, x, "reducescatter", &o)) return HVDS_SUCCESS;
  size_t* counts = calloc((size_t)s->n, sizeof(size_t));
  if (counts == NULL) return launched(s, r, x, o.op, -1, "out of memory");
  int64_t shape[HVDS_MAX_DIMS];
  int32_t ndim = hvds__reducescatter_split(r, s->n, s->my_rank, counts, shape);
  size_t esz = hvds__dtype_bytes((hvds_dtype_t)r->dtype);
  void* out = hvds__entry_alloc_output(o.e, ndim, shape, counts[s->my_rank] * esz);
  if (out == NULL) output_failed(o.op, o.e, counts[s->my_rank] * esz);
  hvds__tl_activity(s->rt, r, "NCCL_REDUCESCATTER");
  int rc = o.api->reducescatter(o.comm, o.e->input.data, out, counts, r->dtype, r->reduce_op,
                                r->prescale, r->postscale, o.ready, o.nready, completed, o.op,
                                o.why, sizeof(o.why));
  hvds__tl_activity(s->rt, r, NULL);
  free(counts);
  return launched(s, r, x, o.op, rc, o.why);
}

static hvds_result_t run_broadcast(hvds_pset_t* s, hvds_response_t* r, hvds_exec_t* x) {
  one_t o;
  if (!prepare_one(s, r, x, "broadcast", &o)) return HVDS_SUCCESS;
  size_t bytes = (size_t)r->sizes[0] * hvds__dtype_bytes((hvds_dtype_t)r->dtype);
  hvds__tl_activity(s->rt, r, "NCCL_BCAST");
  int rc = o.api->broadcast(o.comm, o.e->input.data, bytes, r->root_rank, o.ready, o.nready,
                            completed, o.op, o.why, sizeof(o.why));
  hvds__tl_activity(s->rt, r, NULL);
  return launched(s, r, x, o.op, rc, o.why);
}

/* The splits travel over the set's control plane (the flat backend), the rows by NCCL. */
static hvds_result_t run_alltoall(hvds_pset_t* s, hvds_response_t* r, hvds_exec_t* x) {
  one_t o;
  if (!prepare_one(s, r, x, "alltoall", &o)) return HVDS_SUCCESS;
  hvds_alltoall_plan_t p;
  hvds_result_t exchanged = hvds__alltoall_plan(s, r, o.e, hvds__backend_flat.alltoallv, &p);
  if (exchanged != HVDS_SUCCESS) {
    free(o.op);        // nothing launched
    return exchanged;  // the control plane failed: x's entries fail with its message
  }
  void* out = hvds__entry_alloc_output(o.e, r->nextra, p.shape, p.received);
  if (out == NULL) output_failed(o.op, o.e, p.received);
  hvds__alltoall_keep_splits(s->rt, o.e, p.recv_splits, s->n);
  hvds__tl_activity(s->rt, r, "NCCL_ALLTOALL");
  int rc = o.api->alltoall(o.comm, o.e->input.data, p.send_bytes, out, p.recv_bytes, o.ready,
                           o.nready, completed, o.op, o.why, sizeof(o.why));
  hvds__tl_activity(s->rt, r, NULL);
  hvds__alltoall_plan_free(&p);
  return launched(s, r, x, o.op, rc, o.why);
}

static hvds_result_t run(hvds_pset_t* s, hvds_response_t* r, hvds_exec_t* x) {
  switch (r->type) {
    case HVDS_MSG_ALLREDUCE:
      return run_allreduce(s, r, x);
    case HVDS_MSG_ALLGATHER:
      return run_allgather(s, r, x);
    case HVDS_MSG_BROADCAST:
      return run_broadcast(s, r, x);
    case HVDS_MSG_ALLTOALL:
      return run_alltoall(s, r, x);
    default:
      return run_reducescatter(s, r, x);
  }
}

static int takes(const hvds_pset_t* s, const hvds_response_t* r, size_t bytes) {
  (void)s, (void)bytes;
  return r->device == HVDS_DEVICE_CLASS_GPU &&
         hvds__device_routed(r->type, r->reduce_op, (hvds_dtype_t)r->dtype);
}

const hvds_backend_t hvds__backend_device = {
    .name = "nccl",
    .takes = takes,
    .run = run,
};
