// Random elements of any dtype, for the tests that compare kernels with ops/reduce.c.
#ifndef HVDS_TEST_RANDOM_ELEMS_H_
#define HVDS_TEST_RANDOM_ELEMS_H_

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "reduce.h"

namespace hvds_test {

// n random elements of dtype t: every bit pattern for numbers (NaN, Inf, subnormals), 0/1 for
// bool, and about one zero in eight.
inline std::vector<uint8_t> random_elems(hvds_dtype_t t, size_t n, std::mt19937& rng) {
  size_t esz = hvds__dtype_bytes(t);
  std::vector<uint8_t> v(n * esz);
  for (auto& b : v) b = (uint8_t)rng();
  for (size_t i = 0; i < n; i++) {
    if (t == HVDS_BOOL) v[i] &= 1;
    if (rng() % 8 == 0) memset(&v[i * esz], 0, esz);
  }
  return v;
}

}  // namespace hvds_test

#endif  // HVDS_TEST_RANDOM_ELEMS_H_
