/* hvdsparse-perf sparse_allreduce: the synthetic sparse gradients (sparse_gen.c). Every rank
 * draws its own entries from a seed it shares with the others, so the data sets relate as the
 * generator says (shared pool, identical, disjoint) without any communication. */
#ifndef HVDS_PERF_SPARSE_GEN_H_
#define HVDS_PERF_SPARSE_GEN_H_

#include <stddef.h>
#include <stdint.h>

typedef enum {
  SPX_UNIFORM = 0,   /* k distinct indices, uniformly at random, independently per rank */
  SPX_ZIPF = 1,      /* k draws with replacement from a Zipf(1) law over [0, N): a heavy head at
                        the low indices (ZEN's skew), duplicates summed by the runtime */
  SPX_OVERLAP = 2,   /* a fraction `overlap` of the k indices from a pool every rank shares, the
                        rest private: the cost model's shared-pool model */
  SPX_IDENTICAL = 3, /* the same k indices on every rank */
  SPX_DISJOINT = 4,  /* rank r takes indices = r mod P: no two ranks share one */
  SPX_GEN_COUNT = 5
} spx_gen_t;

/* Name <-> id; -1 for an unknown name. */
int spx_gen_parse(const char* name);
const char* spx_gen_name(spx_gen_t g);

/* Rank r of np's k indices in [0, n) (int64), shuffled; *count of them (fewer than k only for
 * disjoint when n / np < k, or when out of memory). Returns a malloc'd array, or NULL when out of
 * memory. */
int64_t* spx_gen_indices(spx_gen_t g, size_t n, size_t k, double overlap, uint64_t seed, int r,
                         int np, size_t* count /* OUT */);

/* splitmix64 step, for values. */
uint64_t spx_rand(uint64_t* state);

#endif /* HVDS_PERF_SPARSE_GEN_H_ */
