/* SSAR_Recursive_double (SparCML, static sparse allreduce by recursive doubling).
 *
 * Algorithm: fold to P2 = 2^floor(log2 P) ranks (sparse_internal.h). Then for mask = 1, 2, ..,
 * P2/2, virtual rank v swaps its whole accumulated stream with v ^ mask (entry count first, then
 * the payload) and merges: after round t every rank holds the sum of 2^(t+1) inputs. Merges
 * switch to dense by the byte rule on the exact union size, and a dense stream stays dense.
 * Unfold: the odd ranks of the folded pairs send the result back.
 * Steps: log2(P2) rounds of two messages, plus a fold and an unfold (two messages each) when P
 * is not a power of two.
 * Cost: sum over rounds of alpha + min(K_t s, N row_bytes) beta, with K_t the union of 2^t
 * supports: L k s for identical supports, (P - 1) k s for disjoint ones; once the union fills in
 * every later round moves the dense vector, which can cost more than a dense allreduce (the
 * selector avoids that region). Packed (c->packed, where the cost model says the link is slow
 * enough): every sparse stream swapped, and the folds', goes with its indices delta-coded
 * (hvds__sparse_xchg), a byte or two per index instead of 4 or 8.
 * Preconditions: Sum/Average. Results are bitwise identical on every rank: partners merge the
 * same two streams, and merge(a, b) == merge(b, a).
 *
 * Inputs summed on each virtual rank for P2 = 4 (inputs a b c d):
 *
 *   round    | v = 0 | v = 1 | v = 2 | v = 3
 *   ---------+-------+-------+-------+------
 *   start    | a     | b     | c     | d
 *   mask 1   | ab    | ab    | cd    | cd     (partners 0-1, 2-3)
 *   mask 2   | abcd  | abcd  | abcd  | abcd   (partners 0-2, 1-3)
 */
#include "sparse_internal.h"

/* The doubling rounds among the P2 virtual ranks. */
static hvds_result_t rounds(hvds_sparse_ctx_t* c, const hvds_sparse_fold_t* f,
                            hvds_sstream_t* acc) {
  for (int mask = 1; mask < f->p2; mask <<= 1) {
    // Swap whole streams with the partner, then merge them.
    int peer = hvds__sparse_fold_real(f, f->v ^ mask);
    hvds_sstream_t t;
    hvds_result_t rc = hvds__sparse_xchg(c, peer, acc, peer, 0, c->lay.dim, &t);
    if (rc != HVDS_SUCCESS) return rc;
    rc = hvds__sparse_merge_in(c, acc, &t, "ssar_recursive_doubling");
    if (rc != HVDS_SUCCESS) return rc;
  }
  return HVDS_SUCCESS;
}

hvds_result_t hvds__sparse_run_ssar_rd(hvds_sparse_ctx_t* c, hvds_sstream_t* in,
                                       hvds_sstream_t* out) {
  return hvds__sparse_run_folded(c, in, out, rounds);
}
