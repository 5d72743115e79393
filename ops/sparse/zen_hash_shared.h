/* ZEN's keyed permutation (zen_hash.h) for host and device: the per-element functions, written
 * once for both sides (hvds_hostdev.h). zen_hash.c's hvds__zen_hash(), hvds__zen_hash_inv() and
 * hvds__zen_owner() wrap them, and the CUDA kernels (cuda/zen.cu) call them on the device.
 *
 * The key schedule is the CPU's: the caller fills an hvds_zen_hash_t with hvds__zen_hash_init()
 * and hands the struct to the kernels by value.
 */
#ifndef HVDS_ZEN_HASH_SHARED_H_
#define HVDS_ZEN_HASH_SHARED_H_

#include "hvds_hostdev.h"
#include "zen_hash.h"

/* One pass of the 4-round Feistel network over the 2 * half bit domain, and its inverse. */
HVDS_HD uint64_t hvds_hd_feistel(const hvds_zen_hash_t* h, uint64_t x) {
  uint64_t l = x >> h->half, r = x & h->mask;
  for (int i = 0; i < 4; i++) {
    uint64_t t = l ^ (hvds_hd_mix64(r ^ h->key[i]) & h->mask);
    l = r;
    r = t;
  }
  return (l << h->half) | r;
}

HVDS_HD uint64_t hvds_hd_feistel_inv(const hvds_zen_hash_t* h, uint64_t y) {
  uint64_t l = y >> h->half, r = y & h->mask;
  for (int i = 3; i >= 0; i--) {
    uint64_t t = r ^ (hvds_hd_mix64(l ^ h->key[i]) & h->mask);
    r = l;
    l = t;
  }
  return (l << h->half) | r;
}

/* The permutation of [0, dim) by cycle walking, and its inverse; x, y must be below dim. The
 * domain is < 4 dim, so fewer than 4 passes are expected. */
HVDS_HD uint64_t hvds_hd_zen_hash(const hvds_zen_hash_t* h, uint64_t x) {
  do x = hvds_hd_feistel(h, x);
  while (x >= h->dim);
  return x;
}

HVDS_HD uint64_t hvds_hd_zen_hash_inv(const hvds_zen_hash_t* h, uint64_t y) {
  do y = hvds_hd_feistel_inv(h, y);
  while (y >= h->dim);
  return y;
}

/* Owner of hashed position y < dim among P: ceil((y + 1) P / dim) - 1. 64-bit arithmetic when
 * (y + 1) P fits (the common case; it is exact, and cheaper than 128-bit on the device). */
HVDS_HD int hvds_hd_zen_owner(uint64_t dim, int P, uint64_t y) {
  uint64_t p = (uint64_t)(unsigned)P;
  if (y + 1 <= UINT64_MAX / p) return (int)(((y + 1) * p - 1) / dim);
  return (int)(((unsigned __int128)(y + 1) * p - 1) / dim);
}

#endif /* HVDS_ZEN_HASH_SHARED_H_ */
