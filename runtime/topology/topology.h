/* The machine's topology through hwloc: cores, NUMA nodes, GPUs (PCI devices) and where they
 * sit; the share of cores each local rank is bound to; a GPU for each local rank by locality.
 * This file's .c is the one place that includes hwloc; without hwloc every function reports
 * HVDS_NOT_SUPPORTED (or no GPU) and binding is a no-op unless asked for. */
#ifndef HVDS_TOPOLOGY_H_
#define HVDS_TOPOLOGY_H_

#include <stddef.h>
#include <stdio.h>

#include "hvdsparse.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hvds_topo hvds_topo_t; /* opaque: a loaded topology */

/* Loads this machine's topology (xml NULL) or an hwloc XML document of xml_len bytes (xml[xml_len]
 * is its terminating NUL), with PCI devices kept. On success *out is freed by hvds__topo_free; on
 * failure *out is NULL and err says why. */
hvds_result_t hvds__topo_load(const char* xml, size_t xml_len, hvds_topo_t** out /* OUT */,
                              char* err, size_t errlen);
void hvds__topo_free(hvds_topo_t* t); /* accepts NULL */

typedef struct {
  int packages, numa_nodes, cores, pus, gpus;
} hvds_topo_counts_t;
void hvds__topo_counts(const hvds_topo_t* t, hvds_topo_counts_t* out /* OUT */);

/* One GPU: a VGA or 3D controller PCI device of NVIDIA or AMD, in PCI bus order
 * (the order of CUDA_DEVICE_ORDER=PCI_BUS_ID and nvidia-smi). */
typedef struct {
  char bus_id[16]; /* "0000:3b:00.0" */
  char name[32];   /* its first OS device ("cuda0", "card1"), or "" */
  int numa;        /* logical index of the nearest NUMA node, -1 when unknown */
  char cpus[128];  /* the cores near it, as a CPU list ("0-3,8-11") */
} hvds_topo_gpu_t;
/* Fills *out for GPU i (0..gpus-1); HVDS_INVALID_ARGUMENT when there is no such GPU. */
hvds_result_t hvds__topo_gpu(const hvds_topo_t* t, int i, hvds_topo_gpu_t* out /* OUT */);

/* The CPUs (OS numbering, as a list "0-3,8") local_rank gets among local_size ranks:
 * "core": contiguous equal shares of the cores in topology order (rank i gets cores
 * [i C / L, (i+1) C / L); with more ranks than cores, core i mod C); "numa": the whole NUMA node
 * i N / L. HVDS_INVALID_ARGUMENT for another mode. */
hvds_result_t hvds__topo_rank_cpus(const hvds_topo_t* t, const char* mode, int local_rank,
                                   int local_size, char* list, size_t len);

/* The GPU local_rank should use (-1: none). Every rank of the host computes the same table:
 * ranks in order each take, among the GPUs used by the fewest ranks so far, the one whose nearby
 * cores overlap the rank's core share ("core" mode) most; ties go to the lower index. So GPUs
 * are spread evenly and each rank gets one next to its cores when the counts allow. */
int hvds__topo_gpu_for_rank(const hvds_topo_t* t, int local_rank, int local_size);

/* Prints the summary `hvdsparse check-build --topology` shows: counts, NUMA nodes with their
 * CPUs, GPUs with their locality, and the GPU and core share of each of local_size ranks. */
void hvds__topo_print(const hvds_topo_t* t, int local_size, FILE* f);

/* Binds this process (every thread) to local_rank's share under mode ("core", "numa"; NULL,
 * "" or "none": nothing; "auto": "core" when every local rank gets a core and the process is
 * not bound already, else nothing). On failure leaves the binding alone and writes err. */
hvds_result_t hvds__topo_bind_self(const char* mode, int local_rank, int local_size, char* err,
                                   size_t errlen);

/* 1 when this build has hwloc. */
int hvds__topo_available(void);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_TOPOLOGY_H_ */
