/* Request validation by message kind (validate.h). Each check returns 0 when a and b agree,
 * else the length of the message it wrote to err. */
#include "validate.h"

#include <stdio.h>

#include "dtype.h"
#include "sparse_rt.h"

static void shape_text(const hvds_request_t* r, char* out, size_t len) {
  size_t off = (size_t)snprintf(out, len, "[");
  for (int32_t d = 0; d < r->ndim && off < len; d++)
    off += (size_t)snprintf(out + off, len - off, d ? ", %lld" : "%lld", (long long)r->shape[d]);
  if (off < len) snprintf(out + off, len - off, "]");
}

/* The device class, not the index: rank r on GPU local_rank is the normal case. */
static const char* device_class(int32_t device) { return device < 0 ? "CPU" : "GPU"; }

/* Operation, element type and device class: every kind. */
static int check_common(const hvds_request_t* a, const hvds_request_t* b, char* err, size_t len) {
  const char* tn = hvds__msg_type_name(a->type);
  if (b->type != a->type)
    return snprintf(err, len,
                    "Mismatched operations: One rank did an %s, but another rank did an %s.", tn,
                    hvds__msg_type_name(b->type));
  if (b->dtype != a->dtype)
    return snprintf(
        err, len, "Mismatched data types: One rank had type %s, but another rank had type %s.",
        hvds__dtype_name((hvds_dtype_t)a->dtype), hvds__dtype_name((hvds_dtype_t)b->dtype));
  if ((a->device < 0) != (b->device < 0))
    return snprintf(err, len,
                    "Mismatched %s CPU/GPU device selection: One rank specified device %s, but "
                    "another rank specified device %s.",
                    tn, device_class(a->device), device_class(b->device));
  return 0;
}

/* The global rank of set rank r, clamped into the set (a root outside it is reported as is by
 * the enqueue side; here it only names a rank). */
static int global_rank(const hvds_pset_t* s, int32_t r) {
  return s->ranks[r >= 0 && r < s->n ? r : 0];
}

/* Allreduce, broadcast, reducescatter, sparse allreduce: the whole shape, then the kind's own
 * parameters. */
static int check_reduction(const hvds_pset_t* s, const hvds_request_t* a, const hvds_request_t* b,
                           char* err, size_t len) {
  int same = a->ndim == b->ndim;
  for (int32_t d = 0; same && d < a->ndim; d++) same = a->shape[d] == b->shape[d];
  if (!same) {
    char sa[256], sb[256];
    shape_text(a, sa, sizeof sa);
    shape_text(b, sb, sizeof sb);
    return snprintf(err, len,
                    "Mismatched %s tensor shapes: One rank sent a tensor of shape %s, but "
                    "another rank sent a tensor of shape %s.",
                    hvds__msg_type_name(a->type), sa, sb);
  }
  if (a->type == HVDS_MSG_BROADCAST) {
    if (a->root_rank == b->root_rank) return 0;
    return snprintf(err, len,
                    "Mismatched BROADCAST root ranks: One rank specified root rank %d, but "
                    "another rank specified root rank %d.",
                    global_rank(s, a->root_rank), global_rank(s, b->root_rank));
  }
  if (a->prescale != b->prescale || a->postscale != b->postscale)
    return snprintf(err, len,
                    "Mismatched prescale and/or postscale factors: One rank sent factors (%g, "
                    "%g), but another rank sent factors (%g, %g).",
                    a->prescale, a->postscale, b->prescale, b->postscale);
  if (a->reduce_op != b->reduce_op)
    return snprintf(err, len,
                    "Mismatched reduction operation: One rank sent reduction op %d, but another "
                    "rank sent reduction op %d.",
                    a->reduce_op, b->reduce_op);
  if (a->type == HVDS_MSG_SPARSE_ALLREDUCE) return hvds__sparse_validate(a, b, err, len);
  return 0;
}

/* Allgather and alltoall: the first dimension may differ, the rank and the others may not. */
static int check_gather(const hvds_request_t* a, const hvds_request_t* b, char* err, size_t len) {
  const char* tn = hvds__msg_type_name(a->type);
  if (a->ndim != b->ndim)
    return snprintf(err, len,
                    "Mismatched %s tensor shapes: One rank sent a tensor of rank %d, but another "
                    "rank sent a tensor of rank %d.",
                    tn, a->ndim, b->ndim);
  for (int32_t d = 1; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d])
      return snprintf(err, len,
                      "Mismatched %s tensor shapes: One rank sent a tensor with dimension %d "
                      "equal to %lld, but another rank sent a tensor with dimension %d equal to "
                      "%lld.",
                      tn, d, (long long)a->shape[d], d, (long long)b->shape[d]);
  return 0;
}

/* Process-set registration: the same ranks everywhere. */
static int check_ps_add(const hvds_request_t* a, const hvds_request_t* b, char* err, size_t len) {
  int same = a->nextra == b->nextra;
  for (int32_t i = 0; same && i < a->nextra; i++) same = a->extra[i] == b->extra[i];
  return same ? 0 : snprintf(err, len, "Different ranks tried to add different process sets.");
}

static int check_pair(const hvds_pset_t* s, const hvds_request_t* a, const hvds_request_t* b,
                      char* err, size_t len) {
  int n = check_common(a, b, err, len);
  if (n != 0) return n;
  switch (a->type) {
    case HVDS_MSG_ALLREDUCE:
    case HVDS_MSG_BROADCAST:
    case HVDS_MSG_REDUCESCATTER:
    case HVDS_MSG_SPARSE_ALLREDUCE:
      return check_reduction(s, a, b, err, len);
    case HVDS_MSG_ALLGATHER:
    case HVDS_MSG_ALLTOALL:
      return check_gather(a, b, err, len);
    case HVDS_MSG_PS_ADD:
      return check_ps_add(a, b, err, len);
    default:
      return 0;
  }
}

/* Why Join rules out an operation, as Horovod says it; NULL when Join allows it. */
static const char* join_refusal(int32_t type) {
  switch (type) {
    case HVDS_MSG_ALLGATHER:
      return "Allgather is not supported with Join at this time. Specify sparse_to_dense=True if "
             "using DistributedOptimizer";
    case HVDS_MSG_ALLTOALL:
      return "Alltoall is not supported with Join at this time.";
    case HVDS_MSG_BROADCAST:
      return "Broadcast is not supported with Join at this time.";
    case HVDS_MSG_REDUCESCATTER:
      return "Reducescatter is not supported with Join at this time.";
    default:
      return NULL;
  }
}

int hvds__join_refuses(int32_t type) { return join_refusal(type) != NULL; }

/* What the first request alone can get wrong. */
static int check_alone(const hvds_pset_t* s, const hvds_request_t* a, char* err, size_t len) {
  if (a->type == HVDS_MSG_SPARSE_ALLREDUCE) {
    int n = hvds__sparse_validate(a, NULL, err, len);
    if (n > 0) return n;
  }
  if ((a->type == HVDS_MSG_ALLGATHER || a->type == HVDS_MSG_ALLTOALL ||
       a->type == HVDS_MSG_REDUCESCATTER) && a->ndim == 0)
    return snprintf(err, len, "Process-set rank zero tried to %s a rank-zero tensor.",
                    hvds__msg_type_name(a->type));
  const char* refusal = s->joined_count > 0 ? join_refusal(a->type) : NULL;
  return refusal ? snprintf(err, len, "%s", refusal) : 0;
}

int hvds__validate_requests(const hvds_pset_t* s, const hvds_table_rec_t* rec, char* err,
                            size_t len) {
  int32_t ra = 0;
  while (ra < s->n && rec->reqs[ra].name == NULL) ra++;
  if (ra == s->n) return 0;
  const hvds_request_t* a = &rec->reqs[ra];
  for (int32_t r = ra + 1; r < s->n; r++) {
    if (rec->reqs[r].name == NULL) continue;
    int n = check_pair(s, a, &rec->reqs[r], err, len);
    if (n > 0) {
      if ((size_t)n < len)
        snprintf(err + n, len - (size_t)n, " [tensor: %s; ranks %d and %d]", a->name,
                 s->ranks[ra], s->ranks[r]);
      return -1;
    }
  }
  int n = check_alone(s, a, err, len);
  if (n > 0 && (size_t)n < len) snprintf(err + n, len - (size_t)n, " [tensor: %s]", a->name);
  return n > 0 ? -1 : 0;
}
