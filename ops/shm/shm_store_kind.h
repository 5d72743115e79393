/* How a rank writes its collective slot (shm_coll.c): through the caches, or streamed to memory
 * with non-temporal stores, chosen per size of allreduce by what each kind measured here.
 *
 * Why both: handing a slot to a peer through the caches is fastest while the two CPUs share a
 * last-level cache; while they do not (a virtual machine's CPUs moved apart by the host, or
 * CPUs of different chiplets or sockets), every line the peer reads is fetched from the
 * writer's cache and every line rewritten invalidated in the reader's, and streaming the slot to
 * memory was about 4x faster at 256 KiB and 1 MiB and 1.6-2.3x at 16 MiB (np 2; 16 MiB: 2.1-3.5
 * ms against 4.7-5.7) while up to 1.3x slower with the cache shared. The placement changes while
 * a job runs, so the choice is measured and revised, not fixed at start (docs/benchmarks.md). */
#ifndef HVDS_SHM_STORE_KIND_H
#define HVDS_SHM_STORE_KIND_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { HVDS_STORE_CACHED = 0, HVDS_STORE_STREAMED = 1 } hvds_store_kind_t;

/* Allreduces of fewer bytes always write through the caches (the smallest size measured; the
 * rounds of small ones take shm_coll.c's direct path, which always does). */
#define HVDS_STORE_CHOICE_MIN_BYTES ((size_t)256 << 10)
/* Size classes: log2 of the bytes over HVDS_STORE_CHOICE_MIN_BYTES, the last open-ended. */
#define HVDS_STORE_CLASSES 12
/* A class's first allreduces write through the caches: the first pays for first touches and
 * the machine's warm-up, the later ones measure cached writes as it ends. */
#define HVDS_STORE_FIRST_CACHED 4
/* A try of a kind runs this many allreduces in a row; the first is not counted (see record). */
#define HVDS_STORE_TRY 3
/* Every this many allreduces of a class, the kind not in use is tried again. */
#define HVDS_STORE_RETRY_EVERY 32
/* A kind's estimate is the least of its last this many recorded times: a try's counted ones, so
 * both kinds are judged on as many times, taken next to each other. */
#define HVDS_STORE_WINDOW (HVDS_STORE_TRY - 1)

typedef struct {
  double recent[2][HVDS_STORE_WINDOW]; /* per kind, its last times in us per MiB; 0: none */
  uint8_t next[2];                     /* where each kind's next time goes */
  int8_t last, before;                 /* the kinds of the last two allreduces; -1: none */
  uint32_t ops;
} hvds_store_class_t;

typedef struct {
  hvds_store_class_t cls[HVDS_STORE_CLASSES];
  int forced; /* -1, or the kind every allreduce uses (tests) */
} hvds_store_choice_t;

/* Starts with nothing measured and nothing forced. */
void hvds__store_choice_init(hvds_store_choice_t* c);
/* The kind an allreduce of `bytes` uses: cached below the minimum or where streaming stores do
 * not exist; else cached HVDS_STORE_FIRST_CACHED times, streamed HVDS_STORE_TRY times, then
 * the one with the lower estimate, the other HVDS_STORE_TRY times in a row every
 * HVDS_STORE_RETRY_EVERY allreduces. */
hvds_store_kind_t hvds__store_choice_pick(hvds_store_choice_t* c, size_t bytes);
/* Records that an allreduce of `bytes` with `kind` took `us`, unless the allreduce before it
 * was of the other kind: the first after a switch pays for what the other kind left in the
 * caches (after streamed writes a cached allreduce finds its slots evicted), and counting it
 * kept a faster cached kind from ever winning back. Each kind is judged on the least of its
 * last HVDS_STORE_WINDOW times, the kind in use and the one tried again alike: a kind tried
 * after the CPUs moved wins back at once, and one slow operation does not switch. */
void hvds__store_choice_record(hvds_store_choice_t* c, size_t bytes, hvds_store_kind_t kind,
                               int64_t us);

#ifdef __cplusplus
}
#endif
#endif
