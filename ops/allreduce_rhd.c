/* Recursive halving/doubling allreduce (Rabenseifner), any number of ranks.
 *
 * Algorithm: let P2 be the largest power of two <= P and rem = P - P2.
 *   Fold: among ranks 0..2 rem-1, each even rank sends its whole vector to the odd rank above
 *     it, which folds it in; the even ranks then wait. The P2 remaining ranks get new ranks
 *     0..P2-1 (odd rank 2i+1 -> i, rank r >= 2 rem -> r - rem).
 *   Halving (reduce-scatter): for mask = 1, 2, .., P2/2, new rank n splits its current element
 *     range in two, sends the half its partner n^mask keeps, and folds in the half it keeps
 *     (lower half if bit mask of n is 0). After log2(P2) steps it owns 1/P2 of the range, fully
 *     reduced.
 *   Doubling (allgather): the same partners in reverse order swap their finished halves.
 *   Unfold: each odd rank below 2 rem sends the result to the even rank below it.
 * Steps: 2 log2(P2), plus 2 when P is not a power of two. Latency-optimal; each of the P2 ranks
 * moves about 2 (P2-1)/P2 of the vector, the folded pairs 2 whole vectors more.
 * Preconditions: op commutative and associative. Ranges are split at element granularity, so
 * any count works; when count < P2 the halves would mostly be empty and the vector is tiny, so
 * the P2 ranks instead swap and fold the whole vector at each step (recursive doubling).
 * Results are bitwise identical on every rank (partners fold the same two operands).
 * Pipelining: every exchange is cut into chunk-size segments (hvds__p2p_sendrecv_seg).
 *
 * Element ranges owned by new rank n for P2 = 4, vector = quarters A B C D:
 *
 *   step            | n = 0   | n = 1   | n = 2   | n = 3
 *   ----------------+---------+---------+---------+--------
 *   start           | ABCD    | ABCD    | ABCD    | ABCD
 *   halving mask 1  | AB      | CD      | AB      | CD      (partners 0-1, 2-3)
 *   halving mask 2  | A*      | C*      | B*      | D*      (partners 0-2, 1-3; * = complete)
 *   doubling mask 2 | A*B*    | C*D*    | A*B*    | C*D*
 *   doubling mask 1 | A*B*C*D*| A*B*C*D*| A*B*C*D*| A*B*C*D*
 */
#include <stdlib.h>

#include "collectives.h"
#include "reduce.h"

typedef struct {
  hvds_p2p_t* p;
  char* buf;
  size_t count, esize;
  int rem; /* P - P2: ranks that fold */
  uint64_t tag;
  hvds_p2p_seg_t reduce; /* segments received into scratch and folded in */
  hvds_p2p_seg_t copy;   /* segments received in place */
} rhd_t;

/* Real rank of new rank n. */
static int real_rank(const rhd_t* x, int n) { return n < x->rem ? 2 * n + 1 : n + x->rem; }

static char* at(const rhd_t* x, size_t elem) { return x->buf + elem * x->esize; }

/* Fold: the even rank of each low pair hands its vector to the odd one. Returns the new rank,
 * -1 for a rank that sits out. */
static hvds_result_t fold(const rhd_t* x, int* newrank) {
  int r = x->p->rank;
  size_t bytes = x->count * x->esize;
  *newrank = r >= 2 * x->rem ? r - x->rem : (r % 2 ? r / 2 : -1);
  if (r >= 2 * x->rem) return HVDS_SUCCESS;
  if (r % 2 == 0)
    return hvds__p2p_sendrecv_seg(x->p, r + 1, x->buf, bytes, -1, NULL, 0, x->tag, &x->reduce);
  return hvds__p2p_sendrecv_seg(x->p, -1, NULL, 0, r - 1, x->buf, bytes, x->tag, &x->reduce);
}

/* Unfold: the odd rank of each low pair returns the result to the even one. */
static hvds_result_t unfold(const rhd_t* x) {
  int r = x->p->rank;
  size_t bytes = x->count * x->esize;
  if (r >= 2 * x->rem) return HVDS_SUCCESS;
  if (r % 2)
    return hvds__p2p_sendrecv_seg(x->p, r - 1, x->buf, bytes, -1, NULL, 0, x->tag, &x->copy);
  return hvds__p2p_sendrecv_seg(x->p, -1, NULL, 0, r + 1, x->buf, bytes, x->tag, &x->copy);
}

/* Tiny vectors: swap and fold the whole vector with partner n^mask at each step. */
static hvds_result_t recursive_doubling(const rhd_t* x, int n, int p2) {
  size_t bytes = x->count * x->esize;
  for (int mask = 1; mask < p2; mask <<= 1) {
    int peer = real_rank(x, n ^ mask);
    hvds_result_t rc =
        hvds__p2p_sendrecv_seg(x->p, peer, x->buf, bytes, peer, x->buf, bytes, x->tag, &x->reduce);
    if (rc != HVDS_SUCCESS) return rc;
  }
  return HVDS_SUCCESS;
}

/* Halving then doubling over the P2 new ranks. lo/len record each step's range for the way back. */
static hvds_result_t halving_doubling(const rhd_t* x, int n, int p2) {
  size_t lo = 0, len = x->count, lo_at[32], len_at[32];
  int steps = 0;
  for (int mask = 1; mask < p2; mask <<= 1, steps++) {
    // Halving step: keep the lower half if bit `mask` of n is 0; fold the partner's copy of it in.
    int peer = real_rank(x, n ^ mask);
    size_t half = len / 2, keep_lo = (n & mask) ? lo + half : lo;
    size_t keep_len = (n & mask) ? len - half : half;
    size_t give_lo = (n & mask) ? lo : lo + half, give_len = len - keep_len;
    lo_at[steps] = lo;
    len_at[steps] = len;
    hvds_result_t rc =
        hvds__p2p_sendrecv_seg(x->p, peer, at(x, give_lo), give_len * x->esize, peer,
                               at(x, keep_lo), keep_len * x->esize, x->tag, &x->reduce);
    if (rc != HVDS_SUCCESS) return rc;
    lo = keep_lo;
    len = keep_len;
  }
  for (int s = steps - 1; s >= 0; s--) {
    // Doubling step: send our finished range, receive the partner's: step s's range is done.
    int peer = real_rank(x, n ^ (1 << s));
    size_t other_lo = lo == lo_at[s] ? lo + len : lo_at[s];
    size_t other_len = len_at[s] - len;
    hvds_result_t rc =
        hvds__p2p_sendrecv_seg(x->p, peer, at(x, lo), len * x->esize, peer, at(x, other_lo),
                               other_len * x->esize, x->tag, &x->copy);
    if (rc != HVDS_SUCCESS) return rc;
    lo = lo_at[s];
    len = len_at[s];
  }
  return HVDS_SUCCESS;
}

static hvds_result_t run(rhd_t* x) {
  int p2 = 1;
  while (p2 * 2 <= x->p->size) p2 *= 2;
  x->rem = x->p->size - p2;
  int n;
  hvds_result_t rc = fold(x, &n);
  if (rc == HVDS_SUCCESS && n >= 0)
    rc = x->count < (size_t)p2 ? recursive_doubling(x, n, p2) : halving_doubling(x, n, p2);
  if (rc == HVDS_SUCCESS) rc = unfold(x);
  return rc;
}

hvds_result_t hvds__allreduce_rhd(hvds_p2p_t* p, void* buf, size_t count, hvds_dtype_t dtype,
                                  hvds_reduce_op_t op, const hvds_coll_opts_t* o) {
  hvds_result_t rc = hvds__coll_check(p, dtype, op);
  if (rc != HVDS_SUCCESS || count == 0 || p->size == 1) return rc;
  size_t esize = hvds__dtype_bytes(dtype);
  // No exchange receives more than the whole vector, so segments never exceed it.
  size_t segb = hvds__coll_segment(o, esize);
  if (segb > count * esize) segb = count * esize;
  void* scratch = malloc(2 * segb);
  if (scratch == NULL) return hvds__coll_nomem(p, "allreduce_rhd");
  rhd_t x = {.p = p,
             .buf = buf,
             .count = count,
             .esize = esize,
             .tag = o != NULL ? o->tag : 0,
             .reduce = {segb, scratch, dtype, op},
             .copy = {segb, NULL, dtype, op}};
  rc = run(&x);
  free(scratch);
  return rc;
}
