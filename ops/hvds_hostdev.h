/* Element logic shared by the CPU kernels (ops/) and the CUDA kernels (cuda/): one definition,
 * compiled by the C or C++ compiler for the host and by nvcc for the device, so the CPU tests of
 * test/cuda_host/ check exactly what the kernels run against the reference kernels of ops/.
 *
 * HVDS_HD marks a function usable on both sides. In C and host C++ it is `static inline`; under
 * nvcc it adds __host__ __device__. Bit casts go through the CUDA intrinsics on the device and
 * memcpy on the host (both are exact reinterpretations).
 */
#ifndef HVDS_HOSTDEV_H_
#define HVDS_HOSTDEV_H_

#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define HVDS_HD static inline __host__ __device__
#else
#define HVDS_HD static inline
#endif

HVDS_HD uint32_t hvds_hd_f32_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
#endif
}

HVDS_HD float hvds_hd_bits_f32(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
#endif
}

HVDS_HD uint64_t hvds_hd_f64_bits(double d) {
#if defined(__CUDA_ARCH__)
  return (uint64_t)__double_as_longlong(d);
#else
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
#endif
}

/* splitmix64's finalizer: a fast bijective 64-bit mixer (ZEN's hash, the quantizer's draws). */
HVDS_HD uint64_t hvds_hd_mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

#endif /* HVDS_HOSTDEV_H_ */
