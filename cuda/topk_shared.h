/* The element logic of the GPU top-k (cuda/topk.cu) for host and device (hvds_hostdev.h): the
 * magnitude key, one step of the radix selection, and the output slot of a selected entry.
 *
 * The rules are ops/topk.c's: a key is the bit pattern with the sign cleared, so keys order as
 * magnitudes and a NaN ranks above infinity; the k-th largest key is found digit by digit from
 * the top; every key above it is taken, then the first k - above keys equal to it in index order;
 * zeros are never taken. test/cuda_host/ runs a selection built from these functions against
 * hvds__topk_feedback(); test/gpu/ runs the kernels.
 */
#ifndef HVDS_CUDA_TOPK_SHARED_H_
#define HVDS_CUDA_TOPK_SHARED_H_

#include "hvds_hostdev.h"

/* Where the radix selection stands: the digits fixed so far (prefix, under mask) and how many
 * keys lie above that prefix. All zero before the first digit; after the last, prefix is the k-th
 * largest key and above the number of keys larger than it. */
typedef struct {
  uint64_t prefix;
  uint64_t mask;
  uint64_t above;
} hvds_hd_topk_sel_t;

HVDS_HD uint32_t hvds_hd_topk_key_f32(float v) { return hvds_hd_f32_bits(v) & 0x7fffffffu; }

HVDS_HD uint64_t hvds_hd_topk_key_f64(double v) {
  return hvds_hd_f64_bits(v) & 0x7fffffffffffffffULL;
}

/* Whether key agrees with the digits fixed so far (only those keys are counted next). */
HVDS_HD int hvds_hd_topk_matches(const hvds_hd_topk_sel_t* sel, uint64_t key) {
  return (key & sel->mask) == sel->prefix;
}

/* Whether bucket b of a digit's histogram holds the need-th largest matching key (need >= 1),
 * the buckets being visited from the top with `seen` keys in those above b: the first bucket
 * where the count reaches need, or bucket 0 when none does. Exactly one bucket answers 1, so the
 * buckets can be tested in parallel once each knows its `seen`. */
HVDS_HD int hvds_hd_topk_crosses(uint64_t seen, uint64_t count, uint64_t need, uint32_t b) {
  return seen < need && (seen + count >= need || b == 0);
}

/* Fixes the digit at `shift` (width bits) to b, `seen` matching keys lying in the buckets above
 * b. The next digit then looks for the (need - seen)-th largest key, need being k - above. */
HVDS_HD void hvds_hd_topk_descend(hvds_hd_topk_sel_t* sel, uint32_t b, int shift, int width,
                                  uint64_t seen) {
  sel->above += seen;
  sel->prefix |= (uint64_t)b << shift;
  sel->mask |= (((uint64_t)1 << width) - 1) << shift;
}

/* Whether a key is above the k-th largest (always taken) or ties with it (taken in index order
 * while ties remain). A zero k-th key has no ties: zeros are never taken. */
HVDS_HD int hvds_hd_topk_above(uint64_t key, uint64_t kth) { return key > kth; }
HVDS_HD int hvds_hd_topk_tie(uint64_t key, uint64_t kth) { return key == kth && kth != 0; }

/* The output slot of an entry, or -1 when it is not taken: ties = k - above entries equal to the
 * k-th are taken, and gt_before / tie_before count the entries before this one (in index order)
 * that are above the k-th / tie with it. The slot is the number of taken entries before this
 * one, so the output is in increasing index order. */
HVDS_HD int64_t hvds_hd_topk_slot(uint64_t key, uint64_t kth, uint64_t ties, uint64_t gt_before,
                                  uint64_t tie_before) {
  uint64_t taken_ties = tie_before < ties ? tie_before : ties;
  if (hvds_hd_topk_above(key, kth)) return (int64_t)(gt_before + taken_ties);
  if (hvds_hd_topk_tie(key, kth) && tie_before < ties) return (int64_t)(gt_before + tie_before);
  return -1;
}

#endif /* HVDS_CUDA_TOPK_SHARED_H_ */
