/* Top-k selection with error feedback (topk.h): the sampled threshold, the fused
 * add-store-collect pass, and the radix selection of the k-th largest magnitude.
 *
 * Everything is written once per element type through the macros at the end: float32 keys are
 * 31 bits, float64 keys 63 bits (the bit pattern without its sign).
 */
#include "topk.h"

#include <stdlib.h>
#include <string.h>

#include "splitmix.h"

#define DIGIT_BITS 11
#define BUCKETS (1 << DIGIT_BITS)
#define CHUNK 16      /* elements tested together by the collecting pass */
#define SAMPLE_RUN 16 /* neighbouring elements the sample reads per draw: a cache line */

/* Draw j of the sample: a position below n (the high half of a 64 x 64-bit product, which
 * spreads a uniform 64-bit number over [0, n) without a division). */
static inline int64_t draw_below(uint64_t seed, uint64_t j, int64_t n) {
  return (int64_t)(((unsigned __int128)hvds__splitmix_at(seed, j) * (uint64_t)n) >> 64);
}

static inline uint32_t key_f32(float v) {
  uint32_t b;
  memcpy(&b, &v, sizeof b);
  return b & 0x7fffffffu;
}

static inline uint64_t key_f64(double v) {
  uint64_t b;
  memcpy(&b, &v, sizeof b);
  return b & 0x7fffffffffffffffULL;
}

/* Where the k-th largest key lies: its value, and how many keys are strictly larger. */
typedef struct {
  uint64_t kth;
  int64_t above;
} kth_t;

/* One step of the radix selection: hist holds the counts of the digit at `shift` among the keys
 * that match the prefix so far; moves the prefix one digit down towards the need-th largest. */
static void descend(const int64_t* hist, int width, int shift, uint64_t* prefix, uint64_t* mask,
                    int64_t* need, int64_t* above) {
  int64_t seen = 0;
  for (int b = (1 << width) - 1; b >= 0; b--) {
    if (seen + hist[b] >= *need || b == 0) {
      *above += seen;
      *need -= seen;
      *prefix |= (uint64_t)b << shift;
      *mask |= (((uint64_t)1 << width) - 1) << shift;
      return;
    }
    seen += hist[b];
  }
}

/* The k-th largest of n keys read by KEY(src[i]) (1 <= k <= n), in ceil(BITS / 11) passes over
 * all of src: the exact path, which has no room to set keys aside. */
#define DEFINE_KTH(NAME, T, KEY, BITS)                                                  \
  static kth_t NAME(const T* src, int64_t n, int64_t k) {                               \
    uint64_t prefix = 0, mask = 0;                                                      \
    int64_t need = k, above = 0;                                                        \
    int64_t hist[BUCKETS];                                                              \
    for (int shift = (BITS); shift > 0;) {                                              \
      int width = shift >= DIGIT_BITS ? DIGIT_BITS : shift;                             \
      shift -= width;                                                                   \
      uint64_t digit = ((uint64_t)1 << width) - 1;                                      \
      memset(hist, 0, sizeof(int64_t) << width);                                        \
      for (int64_t i = 0; i < n; i++) {                                                 \
        uint64_t key = KEY(src[i]);                                                     \
        if ((key & mask) == prefix) hist[(key >> shift) & digit]++;                     \
      }                                                                                 \
      descend(hist, width, shift, &prefix, &mask, &need, &above);                       \
    }                                                                                   \
    return (kth_t){prefix, above};                                                      \
  }

/* The k-th largest of n keys (1 <= k <= n) with room to spare: after each digit only the keys
 * in the chosen bucket are kept (in spare, n keys long), so the later passes read a few of them
 * instead of all n. */
#define DEFINE_KTH_NARROWING(NAME, KEY_T, BITS)                              \
  static kth_t NAME(const KEY_T* keys, int64_t n, int64_t k, KEY_T* spare) { \
    uint64_t prefix = 0, mask = 0;                                           \
    int64_t need = k, above = 0, len = n;                                    \
    int64_t hist[BUCKETS];                                                   \
    const KEY_T* src = keys;                                                 \
    for (int shift = (BITS); shift > 0;) {                                   \
      int width = shift >= DIGIT_BITS ? DIGIT_BITS : shift;                  \
      shift -= width;                                                        \
      uint64_t digit = ((uint64_t)1 << width) - 1;                           \
      memset(hist, 0, sizeof(int64_t) << width);                             \
      for (int64_t i = 0; i < len; i++) hist[(src[i] >> shift) & digit]++;   \
      descend(hist, width, shift, &prefix, &mask, &need, &above);            \
      if (shift == 0) break;                                                 \
      int64_t kept = 0;                                                      \
      for (int64_t i = 0; i < len; i++) { /* branch-free: most keys leave */ \
        KEY_T key = src[i];                                                  \
        spare[kept] = key;                                                   \
        kept += (key & mask) == prefix;                                      \
      }                                                                      \
      src = spare;                                                           \
      len = kept;                                                            \
    }                                                                        \
    return (kth_t){prefix, above};                                           \
  }

DEFINE_KTH(kth_f32, float, key_f32, 31)
DEFINE_KTH(kth_f64, double, key_f64, 63)
DEFINE_KTH_NARROWING(kth_keys31, uint32_t, 31)
DEFINE_KTH_NARROWING(kth_keys63, uint64_t, 63)

/* Appends entry i (value v) to the output. */
#define EMIT(i, v)                                                                      \
  do {                                                                                  \
    if (idx32)                                                                          \
      idx32[c] = (int32_t)(i);                                                          \
    else                                                                                \
      idx64[c] = (int64_t)(i);                                                          \
    vals[c++] = (v);                                                                    \
  } while (0)

/* Whether a key at or above the k-th is taken: everything above it, then the first `ties`
 * equal to it (never zeros). */
#define TAKE(key, sel, ties) ((key) > (sel).kth || ((key) == (sel).kth && (sel).kth && (ties)-- > 0))

/* The sampled path's candidates: position, key and value, in index order. */
#define DEFINE_CANDIDATES(SUFFIX, T, KEY_T, KEY)                                            \
  typedef struct {                                                                          \
    int64_t* at;                                                                            \
    KEY_T* keys;                                                                            \
    T* vals;                                                                                \
  } cand_##SUFFIX##_t;                                                                      \
                                                                                            \
  /* Appends the entries of acc[lo, hi) whose key is >= t after the c found so far; returns \
   * the new count (those past cap are counted, not kept). Branch-free on the key: a slot   \
   * is written either way and reused when the entry is not a candidate. */                 \
  static inline int64_t append_##SUFFIX(const T* acc, int64_t lo, int64_t hi, KEY_T t,      \
                                        cand_##SUFFIX##_t* cand, int64_t c, int64_t cap) {  \
    for (int64_t i = lo; i < hi; i++) {                                                     \
      KEY_T key = KEY(acc[i]);                                                              \
      if (c < cap) {                                                                        \
        cand->at[c] = i;                                                                    \
        cand->keys[c] = key;                                                                \
        cand->vals[c] = acc[i];                                                             \
      }                                                                                     \
      c += key >= t;                                                                        \
    }                                                                                       \
    return c;                                                                               \
  }

DEFINE_CANDIDATES(f32, float, uint32_t, key_f32)
DEFINE_CANDIDATES(f64, double, uint64_t, key_f64)

/* The whole of one element type: exact selection over acc, the sampled path, the entry. */
#define DEFINE_TOPK(SUFFIX, T, KEY_T, KEY, KTH, KTH_KEYS)                                          \
  static int64_t exact_##SUFFIX(T* acc, int64_t n, int64_t k, int32_t* idx32, int64_t* idx64,      \
                                T* vals) {                                                         \
    kth_t sel = KTH(acc, n, k);                                                                    \
    int64_t ties = k - sel.above, c = 0;                                                           \
    for (int64_t i = 0; i < n && c < k; i++) {                                                     \
      uint64_t key = KEY(acc[i]);                                                                  \
      if (TAKE(key, sel, ties)) {                                                                  \
        EMIT(i, acc[i]);                                                                           \
        acc[i] = 0;                                                                                \
      }                                                                                            \
    }                                                                                              \
    return c;                                                                                      \
  }                                                                                                \
                                                                                                   \
  static void add_##SUFFIX(T* acc, const T* grad, int64_t n) {                                     \
    for (int64_t i = 0; i < n; i++) acc[i] += grad[i];                                             \
  }                                                                                                \
                                                                                                   \
  /* The sampled threshold's key (at least 1: zeros are never candidates). The sample is           \
   * drawn as runs of SAMPLE_RUN neighbours starting at random places: the same share of           \
   * acc with a cache miss or two per run instead of one per element. */                           \
  static uint64_t threshold_##SUFFIX(const T* acc, const T* grad, int64_t n,                       \
                                     const hvds_topk_plan_t* plan, KEY_T* keys, KEY_T* spare) {    \
    int64_t m = plan->sample;                                                                      \
    for (int64_t j = 0; j < m; j += SAMPLE_RUN) {                                                  \
      int64_t len = m - j < SAMPLE_RUN ? m - j : SAMPLE_RUN;                                       \
      int64_t lo = n >= SAMPLE_RUN ? draw_below(plan->seed, (uint64_t)j, n - SAMPLE_RUN + 1) : 0;  \
      for (int64_t r = 0; r < len; r++) {                                                          \
        int64_t i = n >= SAMPLE_RUN ? lo + r : draw_below(plan->seed, (uint64_t)(j + r), n);       \
        keys[j + r] = (KEY_T)KEY(grad ? (T)(acc[i] + grad[i]) : acc[i]);                           \
      }                                                                                            \
    }                                                                                              \
    uint64_t t = KTH_KEYS(keys, m, plan->sample_rank, spare).kth;                                  \
    return t ? t : 1;                                                                              \
  }                                                                                                \
                                                                                                   \
  /* Adds, stores and collects the candidates (key >= t) with their keys and values; returns       \
   * how many there were, of which the first cap are in cand. Blocks of CHUNK elements are         \
   * added and tested branch-free (vectorised); the rare block holding a candidate is              \
   * scanned again and its candidates appended. */                                                 \
  static int64_t collect_##SUFFIX(T* acc, const T* grad, int64_t n, uint64_t t64,                  \
                                  cand_##SUFFIX##_t* cand, int64_t cap) {                          \
    KEY_T t = (KEY_T)t64; /* keys of this type fit their own width */                              \
    int64_t c = 0;                                                                                 \
    for (int64_t lo = 0; lo < n; lo += CHUNK) {                                                    \
      int64_t hi = n - lo < CHUNK ? n : lo + CHUNK;                                                \
      int hit = 0;                                                                                 \
      if (grad)                                                                                    \
        for (int64_t i = lo; i < hi; i++) {                                                        \
          acc[i] += grad[i];                                                                       \
          hit |= KEY(acc[i]) >= t;                                                                 \
        }                                                                                          \
      else                                                                                         \
        for (int64_t i = lo; i < hi; i++) hit |= KEY(acc[i]) >= t;                                 \
      if (hit) c = append_##SUFFIX(acc, lo, hi, t, cand, c, cap);                                  \
    }                                                                                              \
    return c;                                                                                      \
  }                                                                                                \
                                                                                                   \
  /* The top `take` of the found candidates, out in index order and zeroed in acc. */              \
  static int64_t take_##SUFFIX(T* acc, const cand_##SUFFIX##_t* cand, int64_t found, int64_t take, \
                               KEY_T* spare, int32_t* idx32, int64_t* idx64, T* vals) {            \
    kth_t sel = take ? KTH_KEYS(cand->keys, found, take, spare) : (kth_t){UINT64_MAX, 0};          \
    int64_t ties = take - sel.above, c = 0;                                                        \
    for (int64_t j = 0; j < found && c < take; j++) {                                              \
      if (TAKE((uint64_t)cand->keys[j], sel, ties)) {                                              \
        EMIT(cand->at[j], cand->vals[j]);                                                          \
        acc[cand->at[j]] = 0;                                                                      \
      }                                                                                            \
    }                                                                                              \
    return c;                                                                                      \
  }                                                                                                \
                                                                                                   \
  static hvds_result_t feedback_##SUFFIX(                                                          \
      T* acc, const T* grad, int64_t n, const hvds_topk_plan_t* plan, int32_t* idx32,              \
      int64_t* idx64, T* vals, int64_t* count, int32_t* exact) {                                   \
    int64_t k = plan->k < n ? plan->k : n;                                                         \
    *exact = 1;                                                                                    \
    if (plan->sample <= 0 || k >= n) {                                                             \
      if (grad) add_##SUFFIX(acc, grad, n);                                                        \
      *count = exact_##SUFFIX(acc, n, k, idx32, idx64, vals);                                      \
      return HVDS_SUCCESS;                                                                         \
    }                                                                                              \
    int64_t cap = hvds__topk_candidate_cap(k);                                                     \
    int64_t room = cap > plan->sample ? cap : plan->sample;                                        \
    cand_##SUFFIX##_t cand = {malloc((size_t)cap * sizeof(int64_t)),                               \
                              malloc((size_t)room * sizeof(KEY_T)),                                \
                              malloc((size_t)cap * sizeof(T))};                                    \
    KEY_T* spare = malloc((size_t)room * sizeof(KEY_T));                                           \
    hvds_result_t rc = HVDS_SUCCESS;                                                               \
    if (!cand.at || !cand.keys || !cand.vals || !spare) {                                          \
      if (grad) add_##SUFFIX(acc, grad, n);                                                        \
      *count = 0;                                                                                  \
      rc = HVDS_SYSTEM_ERROR;                                                                      \
    } else {                                                                                       \
      uint64_t t = threshold_##SUFFIX(acc, grad, n, plan, cand.keys, spare);                       \
      int64_t found = collect_##SUFFIX(acc, grad, n, t, &cand, cap);                               \
      if (found > cap || (found < k && t > 1)) {                                                   \
        /* An unlucky sample; with t == 1 every non-zero is a candidate and fewer is right. */     \
        *count = exact_##SUFFIX(acc, n, k, idx32, idx64, vals);                                    \
      } else {                                                                                     \
        *exact = 0;                                                                                \
        *count =                                                                                   \
            take_##SUFFIX(acc, &cand, found, found < k ? found : k, spare, idx32, idx64, vals);    \
      }                                                                                            \
    }                                                                                              \
    free(cand.at);                                                                                 \
    free(cand.keys);                                                                               \
    free(cand.vals);                                                                               \
    free(spare);                                                                                   \
    return rc;                                                                                     \
  }

DEFINE_TOPK(f32, float, uint32_t, key_f32, kth_f32, kth_keys31)
DEFINE_TOPK(f64, double, uint64_t, key_f64, kth_f64, kth_keys63)

int64_t hvds__topk_candidate_cap(int64_t k) { return 3 * k + 1024; }

hvds_result_t hvds__topk_feedback(void* acc, const void* grad, hvds_dtype_t dtype, int64_t n,
                                  const hvds_topk_plan_t* plan, void* indices,
                                  hvds_dtype_t index_dtype, void* values, int64_t* count,
                                  int32_t* exact) {
  int32_t* idx32 = index_dtype == HVDS_INT32 ? indices : NULL;
  int64_t* idx64 = index_dtype == HVDS_INT32 ? NULL : indices;
  int32_t ignored;
  if (!exact) exact = &ignored;
  *count = 0;
  *exact = 0;
  if (n <= 0 || plan->k <= 0) {
    if (n > 0 && grad) {
      if (dtype == HVDS_FLOAT32)
        add_f32(acc, grad, n);
      else
        add_f64(acc, grad, n);
    }
    return HVDS_SUCCESS;
  }
  if (dtype == HVDS_FLOAT32)
    return feedback_f32(acc, grad, n, plan, idx32, idx64, values, count, exact);
  return feedback_f64(acc, grad, n, plan, idx32, idx64, values, count, exact);
}
