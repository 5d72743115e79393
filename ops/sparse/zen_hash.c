/* ZEN's keyed permutation (zen_hash.h). */
#include "zen_hash.h"

#include "splitmix.h"

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

static uint64_t round_fn(const hvds_zen_hash_t* h, uint64_t r, int i) {
  return hvds__mix64(r ^ h->key[i]) & h->mask;
}

/* One pass of the network over the 2 * half bit domain. */
static uint64_t feistel(const hvds_zen_hash_t* h, uint64_t x) {
  uint64_t l = x >> h->half, r = x & h->mask;
  for (int i = 0; i < 4; i++) {
    uint64_t t = l ^ round_fn(h, r, i);
    l = r;
    r = t;
  }
  return (l << h->half) | r;
}

static uint64_t feistel_inv(const hvds_zen_hash_t* h, uint64_t y) {
  uint64_t l = y >> h->half, r = y & h->mask;
  for (int i = 3; i >= 0; i--) {
    uint64_t t = r ^ round_fn(h, l, i);
    r = l;
    l = t;
  }
  return (l << h->half) | r;
}

uint64_t hvds__zen_hash(const hvds_zen_hash_t* h, uint64_t x) {
  // Cycle walking: the domain is < 4 dim, so fewer than 4 passes are expected.
  do x = feistel(h, x);
  while (x >= h->dim);
  return x;
}

uint64_t hvds__zen_hash_inv(const hvds_zen_hash_t* h, uint64_t y) {
  do y = feistel_inv(h, y);
  while (y >= h->dim);
  return y;
}

int hvds__zen_owner(uint64_t dim, int P, uint64_t y) {
  // The largest j with floor(j dim / P) <= y is ceil((y + 1) P / dim) - 1; in 64 bits when
  // the product fits (a 128-bit division is a library call).
  if (y < UINT64_MAX / (unsigned)P) return (int)(((y + 1) * (unsigned)P - 1) / dim);
  return (int)(((unsigned __int128)(y + 1) * (unsigned)P - 1) / dim);
}
