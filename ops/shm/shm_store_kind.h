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
/* The kind not in use is tried again after this many allreduces of a class. Each try it loses
 * by HVDS_STORE_CLEAR_LOSS or more doubles the wait, up to HVDS_STORE_RETRY_MOST allreduces or
 * HVDS_STORE_RETRY_US of the class's allreduce time, whichever comes first; a try it wins or
 * nearly wins brings the wait back to HVDS_STORE_RETRY_EVERY. A try of the slower kind costs
 * what it loses (up to 2-3x an allreduce's time): a try every 32 allreduces, with switches
 * between tries, spent 8-14% of the time at np 2 1-4 MiB where cached writes win by 1.5-2.5x,
 * while the placement that decides the kinds changes over minutes (docs/benchmarks.md). */
#define HVDS_STORE_RETRY_EVERY 32
#define HVDS_STORE_RETRY_MOST 1024
#define HVDS_STORE_RETRY_US 5e6
#define HVDS_STORE_CLEAR_LOSS 1.2
/* A kind's estimate is the least of its last this many recorded times: a try's counted ones, so
 * both kinds are judged on as many times, taken next to each other. */
#define HVDS_STORE_WINDOW (HVDS_STORE_TRY - 1)

typedef struct {
  double recent[2][HVDS_STORE_WINDOW]; /* per kind, its last times in us per MiB; 0: none */
  uint8_t next[2];                     /* where each kind's next time goes */
  int8_t last, before;                 /* the kinds of the last two allreduces; -1: none */
  int8_t in_use;                       /* the kind kept between tries */
  int8_t tried;                        /* the kind of the try under way or just ended; -1: none */
  uint8_t trying;                      /* allreduces left in the try under way */
  uint32_t ops;
  uint32_t since, wait;                /* allreduces since the last try; the wait for the next */
  double us_since;                     /* their time */
} hvds_store_class_t;

typedef struct {
  hvds_store_class_t cls[HVDS_STORE_CLASSES];
  int forced; /* -1, or the kind every allreduce uses (tests) */
} hvds_store_choice_t;

/* Starts with nothing measured and nothing forced. */
void hvds__store_choice_init(hvds_store_choice_t* c);
/* The kind an allreduce of `bytes` uses: cached below the minimum or where streaming stores do
 * not exist; else cached HVDS_STORE_FIRST_CACHED times, then tries of the kind not in use,
 * HVDS_STORE_TRY allreduces each (streamed first, at once), the wait between them as above. The
 * kind in use changes only at the end of a try, to the tried kind if its estimate is the lower:
 * between tries the other kind's estimate is old, and two slow allreduces in a row of the kind
 * in use (frequent with more ranks than cores) used to switch to it on that old estimate. */
hvds_store_kind_t hvds__store_choice_pick(hvds_store_choice_t* c, size_t bytes);
/* Records that an allreduce of `bytes` with `kind` took `us`, unless the allreduce before it
 * was of the other kind: the first after a switch pays for what the other kind left in the
 * caches (after streamed writes a cached allreduce finds its slots evicted), and counting it
 * kept a faster cached kind from ever winning back. Each kind is judged on the least of its
 * last HVDS_STORE_WINDOW times, the kind in use and the one tried alike: a kind tried after
 * the CPUs moved wins back at its try, and one slow operation does not switch. */
void hvds__store_choice_record(hvds_store_choice_t* c, size_t bytes, hvds_store_kind_t kind,
                               int64_t us);

#ifdef __cplusplus
}
#endif
#endif
