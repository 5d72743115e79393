/* Grouping ranks by host for engines that give no local size or cross identity. */
#include "launch_topology.h"

#include <stdint.h>
#include <stdlib.h>

#include "collectives.h"
#include "launch_env.h"
#include "p2p.h"
#include "tags.h"

static int64_t hash_host(const char* s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (; s && *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return (int64_t)h;
}

/* Rank r's local rank: as its engine gave it, else its index among the ranks of its host. */
static int local_rank_of(const int64_t* info, int r) {
  if (info[2 * r + 1] >= 0) return (int)info[2 * r + 1];
  int index = 0;
  for (int q = 0; q < r; q++) index += info[2 * q] == info[2 * r];
  return index;
}

/* Fills t's unknown fields from info: (host hash, local rank or -1) of each of n ranks. */
static void fill(const int64_t* info, int n, int me, hvds_topology_t* t) {
  int my_local = local_rank_of(info, me);
  int local_size = 0, cross_rank = 0, cross_size = 0;
  for (int r = 0; r < n; r++) {
    if (info[2 * r] == info[2 * me]) local_size++;
    if (local_rank_of(info, r) != my_local) continue;
    cross_size++;
    if (r < me) cross_rank++;
  }
  if (t->local_rank == HVDS_LAUNCH_UNKNOWN) t->local_rank = my_local;
  if (t->local_size == HVDS_LAUNCH_UNKNOWN) t->local_size = local_size;
  if (t->cross_rank == HVDS_LAUNCH_UNKNOWN) t->cross_rank = cross_rank;
  if (t->cross_size == HVDS_LAUNCH_UNKNOWN) t->cross_size = cross_size;
}

hvds_result_t hvds__launch_topology(hvds_p2p_t* world, const char* host, hvds_topology_t* t) {
  int n = world->size, me = world->rank;
  int64_t* info = calloc((size_t)n * 2, sizeof(int64_t));
  size_t* bytes = calloc((size_t)n, sizeof(size_t));
  hvds_result_t rc = HVDS_SYSTEM_ERROR;
  if (info != NULL && bytes != NULL) {
    info[2 * me] = hash_host(host);
    info[2 * me + 1] = t->local_rank;
    for (int r = 0; r < n; r++) bytes[r] = 2 * sizeof(int64_t);
    hvds_coll_opts_t o = {HVDS_TAG_INIT_TOPOLOGY, HVDS_ALGO_AUTO, 0, 0};
    rc = n > 1 ? hvds__allgatherv(world, info, bytes, &o) : HVDS_SUCCESS;
  }
  if (rc == HVDS_SUCCESS) fill(info, n, me, t);
  free(info);
  free(bytes);
  return rc;
}
