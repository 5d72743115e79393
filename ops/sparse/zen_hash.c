/* ZEN's keyed permutation (zen_hash.h). */
#include "zen_hash.h"

#include "splitmix.h"
#include "zen_hash_shared.h"

void hvds__zen_hash_init(hvds_zen_hash_t* h, uint64_t dim, uint64_t seed) {
  int bits = 0;
  while (bits < 64 && ((uint64_t)1 << bits) < dim) bits++;
  h->dim = dim;
  h->half = (bits + 1) / 2;
  h->mask = h->half >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << h->half) - 1;
  uint64_t s = seed;
  for (int i = 0; i < 4; i++) {
    s += HVDS_SPLITMIX_GOLDEN;  // splitmix64's sequence
    h->key[i] = hvds__mix64(s);
  }
}

uint64_t hvds__zen_hash(const hvds_zen_hash_t* h, uint64_t x) { return hvds_hd_zen_hash(h, x); }

uint64_t hvds__zen_hash_inv(const hvds_zen_hash_t* h, uint64_t y) {
  return hvds_hd_zen_hash_inv(h, y);
}

int hvds__zen_owner(uint64_t dim, int P, uint64_t y) { return hvds_hd_zen_owner(dim, P, y); }
