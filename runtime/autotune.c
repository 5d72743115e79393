/* Horovod's autotune (HVDSPARSE_AUTOTUNE=1): rank 0 scores the fusion threshold and the cycle
 * time by the bytes allreduced per second and moves them by Bayesian optimisation (bayes_opt.h);
 * every rank takes rank 0's values from a broadcast that all ranks reach in the same cycle, so
 * buckets stay identical everywhere. Knobs the environment set explicitly stay fixed.
 *
 * Scoring: a sample is steps_per_sample cycles that moved allreduce bytes, scored as bytes over
 * the wall time from the first to the end of the last; a point's score is the median of three
 * samples; the first warmup samples are dropped. Horovod's four seed points come first, then
 * expected improvement, max_samples points in all; then the best point is kept for good. */
#include "autotune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bayes_opt.h"
#include "check.h"
#include "collectives.h"
#include "log.h"
#include "param.h"
#include "process_set.h"

#define SYNC_EVERY 8          /* cycles between broadcasts of rank 0's values */
#define SAMPLES_PER_POINT 3
#define FUSION_MAX_MB 64.0    /* Horovod's domain: fusion threshold [0, 64] MB ... */
#define CYCLE_MIN_MS 1.0      /* ... and cycle time [1, 100] ms */
#define CYCLE_MAX_MS 100.0

static const double kSeeds[][2] = {{4, 5}, {32, 50}, {16, 25}, {8, 10}}; /* (MB, ms) */

/* What rank 0 broadcasts. */
typedef struct {
  int64_t fusion_threshold;
  double cycle_ms;
  int64_t active;
} tuned_t;

struct hvds_autotune {
  int on;                 /* every rank: still synchronising */
  int tune_fusion, tune_cycle;
  int steps_per_sample, warmup, max_points;
  FILE* log;
  hvds_bo_t bo;           /* rank 0 */
  double point[2];        /* rank 0: (MB, ms) being scored */
  int waiting_sync;       /* rank 0: a new point is chosen but not applied everywhere yet */
  int samples_seen, npoint_samples, active_cycles;
  double sample_start, sample_bytes, scores[SAMPLES_PER_POINT];
  tuned_t proposal;
};

static double clampd(double v, double lo, double hi) { return v < lo ? lo : v > hi ? hi : v; }

static void propose(hvds_runtime_t* rt, double mb, double ms, int still_tuning) {
  hvds_autotune_t* at = rt->autotune;
  at->point[0] = at->tune_fusion ? clampd(mb, 0, FUSION_MAX_MB) : rt->fusion_threshold / 1048576.0;
  at->point[1] = at->tune_cycle ? clampd(ms, CYCLE_MIN_MS, CYCLE_MAX_MS) : rt->cycle_ms;
  at->proposal.fusion_threshold = (int64_t)(at->point[0] * 1048576.0);
  at->proposal.cycle_ms = at->point[1];
  at->proposal.active = still_tuning;
  at->waiting_sync = 1;
}

hvds_result_t hvds__autotune_init(hvds_runtime_t* rt) {
  hvds__autotune_free(rt);
  int tune_fusion = !hvds__param_is_set(HVDS_PARAM_FUSION_THRESHOLD);
  int tune_cycle = !hvds__param_is_set(HVDS_PARAM_CYCLE_TIME);
  if (hvds__param_int(HVDS_PARAM_AUTOTUNE) <= 0 || rt->size <= 1 || !(tune_fusion || tune_cycle))
    return HVDS_SUCCESS;
  hvds_autotune_t* at = calloc(1, sizeof(*at));
  if (at == NULL) return hvds__set_error(HVDS_SYSTEM_ERROR, "out of memory for autotune");
  rt->autotune = at;
  at->on = 1;
  at->tune_fusion = tune_fusion;
  at->tune_cycle = tune_cycle;
  at->steps_per_sample = (int)hvds__param_int(HVDS_PARAM_AUTOTUNE_STEPS_PER_SAMPLE);
  at->warmup = (int)hvds__param_int(HVDS_PARAM_AUTOTUNE_WARMUP_SAMPLES);
  at->max_points = (int)hvds__param_int(HVDS_PARAM_AUTOTUNE_BAYES_OPT_MAX_SAMPLES);
  if (at->steps_per_sample < 1) at->steps_per_sample = 1;
  if (at->max_points < 1) at->max_points = 1;
  if (at->max_points > HVDS_BO_MAX_POINTS) at->max_points = HVDS_BO_MAX_POINTS;
  if (rt->rank != 0) return HVDS_SUCCESS;
  hvds__bo_init(&at->bo, 2, hvds__param_dbl(HVDS_PARAM_AUTOTUNE_GAUSSIAN_PROCESS_NOISE), 1);
  const char* path = hvds__param_str(HVDS_PARAM_AUTOTUNE_LOG);
  if (path && path[0]) {
    at->log = fopen(path, "w");
    if (at->log == NULL)
      HVDS_WARN("autotune log %s cannot be written; tuning goes on without it", path);
    else
      fprintf(at->log, "cycle_time_ms,tensor_fusion_threshold,score\n");
  }
  propose(rt, kSeeds[0][0], kSeeds[0][1], 1);
  HVDS_INFO("autotune on: fusion threshold %s, cycle time %s", at->tune_fusion ? "tuned" : "fixed",
            at->tune_cycle ? "tuned" : "fixed");
  return HVDS_SUCCESS;
}

void hvds__autotune_free(hvds_runtime_t* rt) {
  hvds_autotune_t* at = rt->autotune;
  if (at == NULL) return;
  if (at->log) fclose(at->log);
  free(at);
  rt->autotune = NULL;
}

static int cmp_dbl(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* Rank 0: a point's score is in; choose the next point, or settle on the best. */
static void next_point(hvds_runtime_t* rt, double score) {
  hvds_autotune_t* at = rt->autotune;
  if (at->log) {
    fprintf(at->log, "%.3f,%lld,%.1f\n", at->point[1], (long long)at->proposal.fusion_threshold,
            score);
    fflush(at->log);
  }
  double unit[2] = {at->point[0] / FUSION_MAX_MB,
                    (at->point[1] - CYCLE_MIN_MS) / (CYCLE_MAX_MS - CYCLE_MIN_MS)};
  hvds__bo_add(&at->bo, unit, score);
  HVDS_INFO("autotune: %.1f MB, %.1f ms -> %.3g bytes/s", at->point[0], at->point[1], score);
  int n = at->bo.n;
  if (n < at->max_points && n < (int)(sizeof(kSeeds) / sizeof(kSeeds[0]))) {
    propose(rt, kSeeds[n][0], kSeeds[n][1], 1);
  } else if (n < at->max_points) {
    hvds__bo_next(&at->bo, unit);
    propose(rt, unit[0] * FUSION_MAX_MB, CYCLE_MIN_MS + unit[1] * (CYCLE_MAX_MS - CYCLE_MIN_MS), 1);
  } else {
    double best[2], y;
    hvds__bo_best(&at->bo, best, &y);
    propose(rt, best[0] * FUSION_MAX_MB, CYCLE_MIN_MS + best[1] * (CYCLE_MAX_MS - CYCLE_MIN_MS), 0);
    HVDS_INFO("autotune done: fusion threshold %lld bytes, cycle time %.1f ms (%.3g bytes/s)",
              (long long)at->proposal.fusion_threshold, at->proposal.cycle_ms, y);
  }
}

/* Rank 0: accounts one cycle that moved bytes of allreduce data, started at start. */
static void score_cycle(hvds_runtime_t* rt, double start, double bytes) {
  hvds_autotune_t* at = rt->autotune;
  if (at->waiting_sync || bytes <= 0) return;
  if (at->active_cycles == 0) {
    at->sample_start = start;
    at->sample_bytes = 0;
  }
  at->sample_bytes += bytes;
  if (++at->active_cycles < at->steps_per_sample) return;
  double secs = hvds__now() - at->sample_start;
  at->active_cycles = 0;
  if (at->samples_seen++ < at->warmup) return;
  at->scores[at->npoint_samples++] = secs > 0 ? at->sample_bytes / secs : 0;
  if (at->npoint_samples < SAMPLES_PER_POINT) return;
  qsort(at->scores, SAMPLES_PER_POINT, sizeof(double), cmp_dbl);
  at->npoint_samples = 0;
  next_point(rt, at->scores[SAMPLES_PER_POINT / 2]);
}

hvds_result_t hvds__autotune_cycle(hvds_pset_t* world, double start, double bytes) {
  hvds_runtime_t* rt = world->rt;
  hvds_autotune_t* at = rt->autotune;
  if (at == NULL || !at->on) return HVDS_SUCCESS;
  if (rt->rank == 0) score_cycle(rt, start, bytes);
  if (rt->world_epoch % SYNC_EVERY != 0) return HVDS_SUCCESS;
  /* Every rank is at the same cycle here: take rank 0's values. */
  tuned_t t = {rt->fusion_threshold, rt->cycle_ms, 1};
  if (rt->rank == 0 && at->waiting_sync) t = at->proposal;
  hvds_coll_opts_t o = {hvds__next_tag(world), HVDS_ALGO_AUTO, 0, 0};
  HVDS_CHECK(hvds__broadcast(world->comm, &t, sizeof(t), 0, &o));
  rt->fusion_threshold = t.fusion_threshold;
  /* Under qmu: the coordinator reads it there while a caller owns the cycle. */
  pthread_mutex_lock(&rt->qmu);
  rt->cycle_ms = t.cycle_ms;
  pthread_mutex_unlock(&rt->qmu);
  at->on = t.active != 0;
  at->waiting_sync = 0;
  if (!at->on && at->log) {
    fclose(at->log);
    at->log = NULL;
  }
  return HVDS_SUCCESS;
}
