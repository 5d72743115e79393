/* Synthetic sparse gradients for hvdsparse-perf sparse_allreduce (sparse_gen.h). */
#include "sparse_gen.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char* const kNames[SPX_GEN_COUNT] = {"uniform", "zipf", "overlap", "identical",
                                                  "disjoint"};

int spx_gen_parse(const char* name) {
  for (int g = 0; g < SPX_GEN_COUNT; g++)
    if (strcmp(name, kNames[g]) == 0) return g;
  return -1;
}

const char* spx_gen_name(spx_gen_t g) { return g < SPX_GEN_COUNT ? kNames[g] : "?"; }

uint64_t spx_rand(uint64_t* s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static int bit_get(const uint64_t* b, size_t i) { return (int)((b[i >> 6] >> (i & 63)) & 1); }
static void bit_set(uint64_t* b, size_t i) { b[i >> 6] |= 1ULL << (i & 63); }

/* Marks k more distinct unmarked indices of [0, n), drawn with rng, and appends them (as
 * lo + stride * i) to out unless out is NULL. k must not exceed the unmarked count. */
static size_t draw_distinct(uint64_t* taken, size_t n, size_t k, uint64_t* rng, int64_t* out,
                            size_t at, size_t stride, size_t lo) {
  for (size_t got = 0; got < k;) {
    size_t i = (size_t)(spx_rand(rng) % n);
    if (bit_get(taken, i)) continue;
    bit_set(taken, i);
    if (out != NULL) out[at + got] = (int64_t)(lo + stride * i);
    got++;
  }
  return at + k;
}

static void shuffle(int64_t* a, size_t n, uint64_t* rng) {
  for (size_t i = n; i > 1; i--) {
    size_t j = (size_t)(spx_rand(rng) % i);
    int64_t t = a[i - 1];
    a[i - 1] = a[j];
    a[j] = t;
  }
}

/* k of the nfree unmarked indices of [0, n): rejection while that is cheap, else the nfree - k
 * that stay out are drawn and every other one is taken. Returns the new end of out (at, with
 * nothing added, when out of memory). */
static size_t pick(uint64_t* taken, size_t n, size_t nfree, size_t k, uint64_t* rng, int64_t* out,
                   size_t at, size_t stride, size_t lo) {
  if (2 * k <= nfree) return draw_distinct(taken, n, k, rng, out, at, stride, lo);
  size_t words = n / 64 + 1;
  uint64_t* stay_out = malloc(words * sizeof(uint64_t));
  if (stay_out == NULL) return at;
  memcpy(stay_out, taken, words * sizeof(uint64_t));
  draw_distinct(stay_out, n, nfree - k, rng, NULL, 0, 0, 0);
  for (size_t i = 0; i < n; i++)
    if (!bit_get(stay_out, i)) {
      bit_set(taken, i);
      out[at++] = (int64_t)(lo + stride * i);
    }
  free(stay_out);
  return at;
}

int64_t* spx_gen_indices(spx_gen_t g, size_t n, size_t k, double overlap, uint64_t seed, int r,
                         int np, size_t* count) {
  if (k > n) k = n;
  int64_t* out = malloc((k + 1) * sizeof(int64_t));
  uint64_t* taken = calloc(n / 64 + 1, sizeof(uint64_t));
  uint64_t mine = seed * 0x2545f4914f6cdd1dULL + (uint64_t)r + 1, common = seed + 0x5eed;
  if (out == NULL || taken == NULL) {
    free(out);
    free(taken);
    return NULL;
  }
  size_t m = 0;
  if (g == SPX_ZIPF) {
    // P(i) ~ 1 / (i + 1): i = floor((n + 1)^u) - 1 for u uniform in [0, 1).
    double ln = log((double)n + 1);
    for (; m < k; m++) {
      double u = (double)(spx_rand(&mine) >> 11) * 0x1.0p-53;
      size_t i = (size_t)floor(exp(u * ln)) - 1;
      out[m] = (int64_t)(i < n ? i : n - 1);
    }
  } else if (g == SPX_DISJOINT) {
    size_t slots = (n - (size_t)r + (size_t)np - 1) / (size_t)np;  // the indices = r mod np
    m = pick(taken, slots, slots, k < slots ? k : slots, &mine, out, 0, (size_t)np, (size_t)r);
  } else {
    double w = g == SPX_IDENTICAL ? 1.0 : g == SPX_OVERLAP ? overlap : 0.0;
    size_t shared = (size_t)(w * (double)k + 0.5);
    m = pick(taken, n, n, shared, &common, out, 0, 1, 0);
    m = pick(taken, n, n - m, k - m, &mine, out, m, 1, 0);
  }
  free(taken);
  shuffle(out, m, &mine);
  *count = m;
  return out;
}
