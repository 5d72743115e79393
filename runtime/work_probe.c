/* Timing the sparse algorithms' local primitives (work_probe.h): radix sorts of 2^16
 * (key, position) pairs with 24-bit keys, keyed hashes over a 2^24 domain, and the quantizer's
 * encode and decode of 2^16 float32 values at 4 bits. Each figure is
 * the total time of back-to-back runs, some 10 ms of work at full speed, divided by the steps:
 * every rank probes at once, so where ranks share cores the runs are preempted as the
 * algorithms' own work would be, and the figure shows the share of a core a rank gets (a
 * fastest-of-n figure would show a whole core). */
#include "work_probe.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "collectives.h"
#include "param.h"
#include "quantize.h"
#include "sparse_stream.h"
#include "state.h"
#include "zen_hash.h"

#define rt hvds__rt

#define PROBE_N ((size_t)1 << 16)
#define PROBE_KEY_BITS 24
#define SORT_RUNS 10                        /* about 1 ms each at 2.5 ns per step */
#define HASH_RUNS 12                        /* about 0.5 ms each */
/* About 0.15 ms each to encode, less to decode: 2-3 ms in all, so that one preemption does not
 * decide the figure. */
#define QUANT_RUNS 16
#define TAG_WORK_PROBE ((1ull << 39) + 24)  // after the network probe's tags (net_probe.c)

static uint64_t next_random(uint64_t* s) {  // xorshift64
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* Seconds per entry step of a radix sort: each pass counts and moves every entry, and each run
 * first copies its n unsorted keys in (one step per entry). */
static double time_sort(uint64_t* key, uint64_t* pos, uint64_t* unsorted) {
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < PROBE_N; i++)
    unsorted[i] = next_random(&s) & (((uint64_t)1 << PROBE_KEY_BITS) - 1);
  double t0 = hvds__now();
  for (int run = 0; run < SORT_RUNS; run++) {
    memcpy(key, unsorted, PROBE_N * sizeof(uint64_t));
    for (size_t i = 0; i < PROBE_N; i++) pos[i] = i;
    if (hvds__sparse_sort_pairs(key, pos, PROBE_N, ((uint64_t)1 << PROBE_KEY_BITS) - 1) !=
        HVDS_SUCCESS)
      return 0;
  }
  double t = hvds__now() - t0;
  return t / ((double)SORT_RUNS * PROBE_N * (1 + (PROBE_KEY_BITS / 8) * 2));
}

/* Seconds per keyed hash (the inverse costs the same). */
static double time_hash(void) {
  hvds_zen_hash_t h;
  hvds__zen_hash_init(&h, (uint64_t)1 << PROBE_KEY_BITS, 12345);
  volatile uint64_t sink = 0;
  uint64_t acc = 0;
  double t0 = hvds__now();
  for (int run = 0; run < HASH_RUNS; run++)
    for (size_t i = 0; i < PROBE_N; i++) acc += hvds__zen_hash(&h, (uint64_t)i * 251 + run);
  double t = hvds__now() - t0;
  sink += acc;
  (void)sink;
  return t / ((double)HASH_RUNS * PROBE_N);
}

/* Seconds per value to quantize at 4 bits (*enc) and to decode (*dec); values is 2^16 floats
 * of scratch, code 2^16 bytes. */
static void time_quant(float* values, char* code, double* enc, double* dec) {
  uint64_t s = 0x243f6a8885a308d3ull;
  for (size_t i = 0; i < PROBE_N; i++)
    values[i] = (float)((int64_t)(next_random(&s) % 2001) - 1000);
  double t0 = hvds__now();
  for (int run = 0; run < QUANT_RUNS; run++)
    hvds__quant_encode(values, PROBE_N, HVDS_FLOAT32, 4, (uint64_t)run + 1, code);
  double t1 = hvds__now();
  for (int run = 0; run < QUANT_RUNS; run++)
    hvds__quant_decode(code, PROBE_N, 4, HVDS_FLOAT32, values);
  double t2 = hvds__now();
  *enc = (t1 - t0) / ((double)QUANT_RUNS * PROBE_N);
  *dec = (t2 - t1) / ((double)QUANT_RUNS * PROBE_N);
}

hvds_result_t hvds__work_probe(hvds_p2p_t* world, hvds_work_speed_t* w) {
  double v[4] = {0, 0, 0, 0};
  hvds_coll_opts_t o = {TAG_WORK_PROBE, HVDS_ALGO_AUTO, 0, 0};
  int on = hvds__param_int(HVDS_PARAM_SPARSE_LOCAL_WORK) != 0;
  if (world->size > 1 && on) {  // start together, so that every rank's runs overlap the others'
    hvds_result_t rc = hvds__allreduce(world, v, 1, HVDS_FLOAT64, HVDS_MAX, &o);
    if (rc != HVDS_SUCCESS) return rc;
  }
  if (on) {
    uint64_t* key = malloc(3 * PROBE_N * sizeof(uint64_t));
    if (key != NULL) {
      v[0] = time_sort(key, key + PROBE_N, key + 2 * PROBE_N);
      v[1] = time_hash();
      time_quant((float*)key, (char*)(key + PROBE_N), &v[2], &v[3]);
    }
    free(key);  // out of memory: this rank's figures are left out
  }
  if (world->size > 1) {
    // The slowest rank's figures: a collective waits for it, and every rank prices alike.
    o.tag = TAG_WORK_PROBE + 1;
    hvds_result_t rc = hvds__allreduce(world, v, 4, HVDS_FLOAT64, HVDS_MAX, &o);
    if (rc != HVDS_SUCCESS) return rc;
  }
  *w = (hvds_work_speed_t){v[0], v[1], v[2], v[3]};
  return HVDS_SUCCESS;
}
