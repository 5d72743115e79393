/* Adasum allreduce: vector halving, distance doubling (VHDD), as Horovod runs it over MPI.
 *
 * Adasum combines two gradients a and b of one tensor as
 *     a' = (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b
 * (a coefficient stays 1 where its vector's squared norm is below sqrt(DBL_MIN)): orthogonal
 * gradients add, parallel ones average. Each tensor of a fused buffer is combined on its own.
 *
 * Let P2 be the largest power of two <= P.
 *   Fold: rank r >= P2 hands its whole buffer to rank r - P2, which combines the two (an
 *     extension: Horovod refuses sizes that are not powers of two).
 *   Halving, level = 1, 2, .., P2/2: rank n and n ^ level split their current element range in
 *     two; the lower keeps the first half, the upper the second, and each sends the other half.
 *     A tensor may now lie across several ranks, so its dot product and squared norms are the
 *     sums of every piece over the 2 level ranks that share n >> log2(2 level) (a butterfly sum
 *     of 3 doubles per tensor), then both halves are combined with the same coefficients.
 *   Doubling: the same partners in reverse order swap their combined halves.
 *   Unfold: rank r - P2 returns the result to rank r.
 * The combination order is a binary tree over the ranks: level 1 combines 0+1, 2+3, ..; level 2
 * (0+1)+(2+3), ..; rank r >= P2 joins r - P2 before level 1. Sums are formed in one order on
 * every rank of a group (a + b on both sides), so the coefficients agree to the bit.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives.h"
#include "dtype.h"
#include "reduce.h"

typedef struct {
  hvds_p2p_t* p;
  char* buf;
  hvds_dtype_t dtype;
  size_t esize;
  const size_t* counts; /* elements of each tensor, in buffer order */
  int ntensors;
  uint64_t tag;
  double* sums; /* 3 per tensor: a.b, |left|^2, |right|^2 */
  double* peer_sums;
} adasum_t;

static double load(hvds_dtype_t dt, const char* p, size_t i) {
  switch (dt) {
    case HVDS_FLOAT64:
      return ((const double*)p)[i];
    case HVDS_FLOAT32:
      return ((const float*)p)[i];
    case HVDS_FLOAT16:
      return hvds__half_to_float(((const uint16_t*)p)[i]);
    default:
      return hvds__bf16_to_float(((const uint16_t*)p)[i]);
  }
}

static void store(hvds_dtype_t dt, char* p, size_t i, double v) {
  switch (dt) {
    case HVDS_FLOAT64:
      ((double*)p)[i] = v;
      break;
    case HVDS_FLOAT32:
      ((float*)p)[i] = (float)v;
      break;
    case HVDS_FLOAT16:
      ((uint16_t*)p)[i] = hvds__float_to_half((float)v);
      break;
    default:
      ((uint16_t*)p)[i] = hvds__float_to_bf16((float)v);
      break;
  }
}

/* Over elements [lo, hi) of the buffer: for each tensor, the dot product of mine (at buf) and
 * theirs (at other, indexed alike) and both squared norms, into x->sums as (dot, left, right). */
static void partial_sums(const adasum_t* x, const char* other, size_t lo, size_t hi,
                         int i_am_left) {
  size_t start = 0;
  for (int t = 0; t < x->ntensors; t++) {
    size_t a = start > lo ? start : lo, end = start + x->counts[t], b = end < hi ? end : hi;
    double dot = 0, mine = 0, theirs = 0;
    for (size_t i = a; i < b; i++) {
      double u = load(x->dtype, x->buf, i), v = load(x->dtype, other, i);
      dot += u * v;
      mine += u * u;
      theirs += v * v;
    }
    x->sums[3 * t] = dot;
    x->sums[3 * t + 1] = i_am_left ? mine : theirs;
    x->sums[3 * t + 2] = i_am_left ? theirs : mine;
    start = end;
  }
}

/* mine = c_mine mine + c_theirs theirs over [lo, hi), each tensor with its coefficients. */
static void combine(const adasum_t* x, const char* other, size_t lo, size_t hi, int i_am_left) {
  static const double tiny = 1.4916681462400413e-154; /* sqrt(DBL_MIN) */
  size_t start = 0;
  for (int t = 0; t < x->ntensors; t++) {
    size_t a = start > lo ? start : lo, end = start + x->counts[t], b = end < hi ? end : hi;
    double dot = x->sums[3 * t], left = x->sums[3 * t + 1], right = x->sums[3 * t + 2];
    double mine_sq = i_am_left ? left : right, theirs_sq = i_am_left ? right : left;
    double c_mine = mine_sq >= tiny ? 1.0 - dot / mine_sq * 0.5 : 1.0;
    double c_theirs = theirs_sq >= tiny ? 1.0 - dot / theirs_sq * 0.5 : 1.0;
    for (size_t i = a; i < b; i++)
      store(x->dtype, x->buf, i,
            c_mine * load(x->dtype, x->buf, i) + c_theirs * load(x->dtype, other, i));
    start = end;
  }
}

/* Sums x->sums over the group of 2 level ranks n belongs to (butterfly, same order on both
 * sides of every exchange). */
static hvds_result_t group_sum(adasum_t* x, int n, int level) {
  size_t bytes = 3 * (size_t)x->ntensors * sizeof(double);
  for (int mask = 1; mask <= level; mask <<= 1) {
    int peer = n ^ mask;
    hvds_result_t rc =
        hvds__p2p_sendrecv(x->p, peer, x->sums, bytes, peer, x->peer_sums, bytes, x->tag);
    if (rc != HVDS_SUCCESS) return rc;
    int lower = (n & mask) == 0;
    for (size_t i = 0; i < 3 * (size_t)x->ntensors; i++)
      x->sums[i] = lower ? x->sums[i] + x->peer_sums[i] : x->peer_sums[i] + x->sums[i];
  }
  return HVDS_SUCCESS;
}

/* Combines the whole buffer with the one a folded rank sent (left: this rank). */
static hvds_result_t fold_in(adasum_t* x, int from, char* scratch, size_t total) {
  hvds_result_t rc = hvds__p2p_recv(x->p, from, scratch, total * x->esize, x->tag);
  if (rc != HVDS_SUCCESS) return rc;
  partial_sums(x, scratch, 0, total, 1);
  combine(x, scratch, 0, total, 1);
  return HVDS_SUCCESS;
}

/* VHDD among ranks 0..p2-1 over [0, total). */
static hvds_result_t vhdd(adasum_t* x, int p2, char* scratch, size_t total) {
  int n = x->p->rank, levels = 0;
  size_t lo_at[32], hi_at[32];
  size_t lo = 0, hi = total;
  for (int level = 1; level < p2; level <<= 1, levels++) {
    int peer = n ^ level, upper = (n & level) != 0;
    size_t mid = lo + (hi - lo) / 2;
    lo_at[levels] = lo;
    hi_at[levels] = hi;
    size_t keep_lo = upper ? mid : lo, keep_hi = upper ? hi : mid;
    size_t send_lo = upper ? lo : mid, send_hi = upper ? mid : hi;
    hvds_result_t rc = hvds__p2p_sendrecv(
        x->p, peer, x->buf + send_lo * x->esize, (send_hi - send_lo) * x->esize, peer,
        scratch + keep_lo * x->esize, (keep_hi - keep_lo) * x->esize, x->tag);
    if (rc != HVDS_SUCCESS) return rc;
    lo = keep_lo;
    hi = keep_hi;
    partial_sums(x, scratch, lo, hi, !upper);
    rc = group_sum(x, n, level);
    if (rc != HVDS_SUCCESS) return rc;
    combine(x, scratch, lo, hi, !upper);
  }
  for (int k = levels - 1; k >= 0; k--) {
    int peer = n ^ (1 << k);
    size_t plo = lo == lo_at[k] ? hi : lo_at[k], phi = lo == lo_at[k] ? hi_at[k] : lo;
    hvds_result_t rc =
        hvds__p2p_sendrecv(x->p, peer, x->buf + lo * x->esize, (hi - lo) * x->esize, peer,
                           x->buf + plo * x->esize, (phi - plo) * x->esize, x->tag);
    if (rc != HVDS_SUCCESS) return rc;
    lo = lo_at[k];
    hi = hi_at[k];
  }
  return HVDS_SUCCESS;
}

hvds_result_t hvds__allreduce_adasum(hvds_p2p_t* p, void* buf, const size_t* counts, int ntensors,
                                     hvds_dtype_t dtype, uint64_t tag) {
  if (dtype != HVDS_FLOAT16 && dtype != HVDS_BFLOAT16 && dtype != HVDS_FLOAT32 &&
      dtype != HVDS_FLOAT64) {
    snprintf(p->error, sizeof(p->error),
             "Adasum reduces float16, bfloat16, float32 and float64, "
             "not %s",
             hvds__dtype_name(dtype));
    return HVDS_INVALID_ARGUMENT;
  }
  int P = p->size, p2 = 1;
  while (p2 * 2 <= P) p2 *= 2;
  size_t total = 0;
  for (int t = 0; t < ntensors; t++) total += counts[t];
  if (P == 1 || ntensors == 0) return HVDS_SUCCESS;
  adasum_t x = {p, buf, dtype, hvds__dtype_bytes(dtype), counts, ntensors, tag, NULL, NULL};
  x.sums = malloc(6 * (size_t)ntensors * sizeof(double));
  char* scratch = malloc(total > 0 ? total * x.esize : 1);
  if (x.sums == NULL || scratch == NULL) {
    free(x.sums);
    free(scratch);
    return hvds__coll_nomem(p, "Adasum allreduce");
  }
  x.peer_sums = x.sums + 3 * (size_t)ntensors;
  int r = p->rank;
  hvds_result_t rc = HVDS_SUCCESS;
  if (r >= p2) {
    rc = hvds__p2p_send(p, r - p2, buf, total * x.esize, tag);
    if (rc == HVDS_SUCCESS) rc = hvds__p2p_recv(p, r - p2, buf, total * x.esize, tag);
  } else {
    if (r + p2 < P) rc = fold_in(&x, r + p2, scratch, total);
    if (rc == HVDS_SUCCESS) rc = vhdd(&x, p2, scratch, total);
    if (rc == HVDS_SUCCESS && r + p2 < P) rc = hvds__p2p_send(p, r + p2, buf, total * x.esize, tag);
  }
  free(x.sums);
  free(scratch);
  return rc;
}
