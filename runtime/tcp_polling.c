/* The tcp transport's polling (tcp_polling.h). Polling beats sleeping only while no rank of
 * this machine waits for a core. Hosts named apart can still share one machine (network
 * namespaces, containers of one node), so the ranks also count who shares this kernel. */
#include "tcp_polling.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives.h"

#define TAG_MACHINE ((1ull << 39) + 32)  // after the probes' tags (net_probe.c, work_probe.c)

int hvds__tcp_poll_us(long long knob, int local_ranks, int machine_ranks, long cores) {
  if (knob >= 0) return knob > 1000000 ? 1000000 : (int)knob;
  int sharing = machine_ranks > local_ranks ? machine_ranks : local_ranks;
  return sharing <= cores ? 50 : 0;
}

/* FNV-1a of this kernel's boot id; 0 when it cannot be read. */
static uint64_t boot_id_hash(void) {
  FILE* f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f == NULL) return 0;
  char id[64] = "";
  size_t n = fread(id, 1, sizeof id - 1, f);
  fclose(f);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n && id[i] != '\n'; i++) h = (h ^ (unsigned char)id[i]) * 1099511628211ull;
  return n > 0 && h != 0 ? h : 0;
}

hvds_result_t hvds__machine_ranks(hvds_p2p_t* world, int* machine_ranks) {
  uint64_t mine = boot_id_hash();
  *machine_ranks = mine != 0 ? 1 : 0;
  if (world->size <= 1) return HVDS_SUCCESS;
  // Every rank's hash at its own slot, then a max-allreduce: every rank sees all of them.
  int64_t* ids = calloc((size_t)world->size, sizeof *ids);
  if (ids == NULL) return HVDS_SYSTEM_ERROR;
  int64_t key = (int64_t)((mine >> 1) | 1);  // positive, so MAX over the zeros keeps it
  ids[world->rank] = mine != 0 ? key : 0;
  hvds_coll_opts_t o = {TAG_MACHINE, HVDS_ALGO_AUTO, 0, 0};
  hvds_result_t rc = hvds__allreduce(world, ids, (size_t)world->size, HVDS_INT64, HVDS_MAX, &o);
  int same = 0;
  for (int i = 0; rc == HVDS_SUCCESS && mine != 0 && i < world->size; i++) same += ids[i] == key;
  if (rc == HVDS_SUCCESS) *machine_ranks = same;
  free(ids);
  return rc;
}
