/* Hot loops built for several x86-64 instruction sets, the loader picking the one the processor
 * runs (GCC's target_clones). Only for loops whose results are the same bits on every clone:
 * element-wise operations, or arithmetic kept from fusing (-ffp-contract=off where a clone has
 * FMA). Not under the sanitizers: their instrumented resolvers run before the sanitizer's
 * runtime is up and crash at load (ThreadSanitizer). */
#ifndef HVDS_KERNEL_CLONES_H_
#define HVDS_KERNEL_CLONES_H_

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
/* AVX2 and the baseline. */
#define HVDS_CLONES_AVX2 __attribute__((target_clones("avx2", "default")))
#else
#define HVDS_CLONES_AVX2
#endif

#endif /* HVDS_KERNEL_CLONES_H_ */
