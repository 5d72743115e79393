/* splitmix64's increment and finalizer: the seeded, counter-based draws of the quantizer and of
 * top-k's sample, and ZEN's hash keys. */
#ifndef HVDS_SPLITMIX_H_
#define HVDS_SPLITMIX_H_

#include <stdint.h>

#include "hvds_hostdev.h"

#define HVDS_SPLITMIX_GOLDEN 0x9e3779b97f4a7c15ULL

/* The finalizer: a fast bijective 64-bit mixer (the one the CUDA kernels use). */
static inline uint64_t hvds__mix64(uint64_t z) { return hvds_hd_mix64(z); }

/* splitmix64's output number i + 1 for state seed. */
static inline uint64_t hvds__splitmix_at(uint64_t seed, uint64_t i) {
  return hvds__mix64(seed + (i + 1) * HVDS_SPLITMIX_GOLDEN);
}

#endif /* HVDS_SPLITMIX_H_ */
