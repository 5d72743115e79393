/* `hvdsparse check-build --topology [-np N]`: the build's summary, then this machine's topology
 * as hwloc sees it (cores, NUMA nodes, GPUs and their locality) and what --bind-to and the GPU
 * choice give each of N local ranks (default: one per GPU, else one per core). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher.h"
#include "topology.h"

int hvds__launcher_check_topology(int argc, char** argv) {
  int np = 0;
  for (int i = 0; i < argc; i++) {
    if ((strcmp(argv[i], "-np") == 0 || strcmp(argv[i], "--num-proc") == 0) && i + 1 < argc) {
      np = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--topology") != 0) {
      fprintf(stderr, "hvdsparse check-build: unknown argument '%s'\n", argv[i]);
      return 2;
    }
  }
  int rc = hvds__launcher_check_build();
  hvds_topo_t* t = NULL;
  char err[256] = "";
  printf("\n");
  if (hvds__topo_load(NULL, 0, &t, err, sizeof err) != HVDS_SUCCESS) {
    printf("Topology: not available (%s)\n", err);
    return rc;
  }
  if (np <= 0) {
    hvds_topo_counts_t c;
    hvds__topo_counts(t, &c);
    np = c.gpus > 0 ? c.gpus : c.cores;
  }
  hvds__topo_print(t, np, stdout);
  hvds__topo_free(t);
  return rc;
}
