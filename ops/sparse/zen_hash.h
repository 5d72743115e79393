/* ZEN's partition function: a keyed bijection of [0, dim), cut into P equal ranges of hashed
 * positions (design/papers/zen.md, section 3.7).
 *
 * The hash is a 4-round Feistel network on the smallest even number of bits covering dim, with
 * splitmix64-mixed round keys, walked in cycles until the value falls back inside [0, dim). It
 * is a permutation, so
 *   - it is lossless and independent of the data (no hash table, no collisions, nothing to tune);
 *   - owner j's candidate set is the contiguous hashed range [start(j), start(j + 1)), so a hash
 *     bitmap of owner j has bit y - start(j) for index hvds__zen_hash_inv(y): no candidate lists;
 *   - with a fresh key the ranges are balanced like balls in bins, whatever the index skew.
 * The key comes from rank 0 (the same on every rank), so every rank computes the same owner.
 */
#ifndef HVDS_SPARSE_ZEN_HASH_H_
#define HVDS_SPARSE_ZEN_HASH_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  uint64_t dim;    /* the domain is [0, dim) */
  int half;        /* bits per Feistel half */
  uint64_t mask;   /* (1 << half) - 1 */
  uint64_t key[4]; /* round keys derived from the seed */
} hvds_zen_hash_t;

void hvds__zen_hash_init(hvds_zen_hash_t* h, uint64_t dim, uint64_t seed);
/* The keyed permutation of [0, dim) and its inverse; x must be below dim. */
uint64_t hvds__zen_hash(const hvds_zen_hash_t* h, uint64_t x);
uint64_t hvds__zen_hash_inv(const hvds_zen_hash_t* h, uint64_t y);
/* Owner of hashed position y < dim among P: the j with start(j) <= y < start(j + 1), where
 * start(j) = floor(j dim / P) (hvds__sparse_part_lo). */
int hvds__zen_owner(uint64_t dim, int P, uint64_t y);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_SPARSE_ZEN_HASH_H_ */
