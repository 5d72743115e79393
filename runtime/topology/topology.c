/* The machine's topology through hwloc (the one file that includes it); see topology.h.
 * Objects are taken in hwloc's logical order, which follows the tree (package, NUMA node,
 * core), so contiguous core shares stay inside NUMA nodes whenever the counts divide. */
#include "topology.h"

#include <stdlib.h>
#include <string.h>

#ifdef HVDS_HAVE_HWLOC
#include <hwloc.h>
#include <pthread.h>

#define MAX_GPUS 64

struct hvds_topo {
  hwloc_topology_t t;
  int ngpus;
  hwloc_obj_t gpus[MAX_GPUS]; /* PCI devices, bus order */
};

int hvds__topo_available(void) { return 1; }

/* A GPU: a VGA (0x0300) or 3D (0x0302) controller from NVIDIA or AMD. A server's management
 * chip also shows a VGA controller, from another vendor. */
static int is_gpu(hwloc_obj_t o) {
  unsigned cls = o->attr->pcidev.class_id, vendor = o->attr->pcidev.vendor_id;
  return (cls == 0x0300 || cls == 0x0302) && (vendor == 0x10de || vendor == 0x1002);
}

static void find_gpus(hvds_topo_t* t) {
  hwloc_obj_t o = NULL;
  while ((o = hwloc_get_next_pcidev(t->t, o)) != NULL && t->ngpus < MAX_GPUS)
    if (is_gpu(o)) t->gpus[t->ngpus++] = o;
}

/* A fresh hwloc topology: this machine's, or the one xml describes (xml != NULL). Returns the step
 * that failed, NULL on success. */
static const char* discover(const char* xml, size_t xml_len, hwloc_topology_t* out) {
  if (hwloc_topology_init(out) != 0) return "hwloc_topology_init";
  const char* step = "keeping PCI devices";
  int rc = hwloc_topology_set_io_types_filter(*out, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (rc == 0 && xml != NULL) {
    step = "reading the XML";
    rc = hwloc_topology_set_xmlbuffer(*out, xml, (int)xml_len + 1);
  }
  if (rc == 0) {
    step = "loading";
    rc = hwloc_topology_load(*out);
  }
  if (rc == 0) return NULL;
  hwloc_topology_destroy(*out);
  return step;
}

/* This machine's topology, discovered once per process and kept until exit: every load after the
 * first is a copy. hwloc's PCI discovery leaves about 1 KiB behind in libpciaccess each time, which
 * a job that initialises again and again (elastic training) would otherwise pay every time. */
static pthread_mutex_t g_machine_lock = PTHREAD_MUTEX_INITIALIZER;
static hwloc_topology_t g_machine;
static int g_machine_loaded;

static const char* copy_of_machine(hwloc_topology_t* out) {
  pthread_mutex_lock(&g_machine_lock);
  const char* failed = g_machine_loaded ? NULL : discover(NULL, 0, &g_machine);
  if (failed == NULL) {
    g_machine_loaded = 1;
    if (hwloc_topology_dup(out, g_machine) != 0) failed = "copying";
  }
  pthread_mutex_unlock(&g_machine_lock);
  return failed;
}

hvds_result_t hvds__topo_load(const char* xml, size_t xml_len, hvds_topo_t** out, char* err,
                              size_t errlen) {
  *out = NULL;
  hvds_topo_t* t = calloc(1, sizeof *t);
  if (t == NULL) {
    snprintf(err, errlen, "out of memory");
    return HVDS_SYSTEM_ERROR;
  }
  const char* failed = xml != NULL ? discover(xml, xml_len, &t->t) : copy_of_machine(&t->t);
  if (failed != NULL) {
    snprintf(err, errlen, "hwloc: %s failed", failed);
    free(t);
    return HVDS_SYSTEM_ERROR;
  }
  find_gpus(t);
  *out = t;
  return HVDS_SUCCESS;
}

void hvds__topo_free(hvds_topo_t* t) {
  if (t == NULL) return;
  hwloc_topology_destroy(t->t);
  free(t);
}

void hvds__topo_counts(const hvds_topo_t* t, hvds_topo_counts_t* out) {
  out->packages = hwloc_get_nbobjs_by_type(t->t, HWLOC_OBJ_PACKAGE);
  out->numa_nodes = hwloc_get_nbobjs_by_type(t->t, HWLOC_OBJ_NUMANODE);
  out->cores = hwloc_get_nbobjs_by_type(t->t, HWLOC_OBJ_CORE);
  out->pus = hwloc_get_nbobjs_by_type(t->t, HWLOC_OBJ_PU);
  out->gpus = t->ngpus;
  if (out->cores <= 0) out->cores = out->pus;  // some virtual machines report no cores
}

/* The cpuset near GPU i (its first non-I/O ancestor's). */
static hwloc_const_cpuset_t gpu_cpuset(const hvds_topo_t* t, int i) {
  hwloc_obj_t a = hwloc_get_non_io_ancestor_obj(t->t, t->gpus[i]);
  return a != NULL ? a->cpuset : hwloc_topology_get_topology_cpuset(t->t);
}

hvds_result_t hvds__topo_gpu(const hvds_topo_t* t, int i, hvds_topo_gpu_t* out) {
  memset(out, 0, sizeof *out);
  if (i < 0 || i >= t->ngpus) return HVDS_INVALID_ARGUMENT;
  hwloc_obj_t g = t->gpus[i];
  snprintf(out->bus_id, sizeof out->bus_id, "%04x:%02x:%02x.%01x", g->attr->pcidev.domain,
           g->attr->pcidev.bus, g->attr->pcidev.dev, g->attr->pcidev.func);
  for (hwloc_obj_t c = g->io_first_child; c != NULL; c = c->next_sibling) {
    if (c->type == HWLOC_OBJ_OS_DEVICE && c->name != NULL) {
      snprintf(out->name, sizeof out->name, "%s", c->name);
      break;
    }
  }
  hwloc_obj_t a = hwloc_get_non_io_ancestor_obj(t->t, g);
  out->numa = -1;
  if (a != NULL && a->nodeset != NULL && !hwloc_bitmap_iszero(a->nodeset)) {
    hwloc_obj_t node = hwloc_get_numanode_obj_by_os_index((hwloc_topology_t)t->t,
                                                          (unsigned)hwloc_bitmap_first(a->nodeset));
    out->numa = node != NULL ? (int)node->logical_index : -1;
  }
  hwloc_bitmap_list_snprintf(out->cpus, sizeof out->cpus, gpu_cpuset(t, i));
  return HVDS_SUCCESS;
}

/* Fills set with local_rank's share under mode; -1 for an unknown mode. */
/* What "a core" is here: cores where hwloc sees them, else processing units. */
static hwloc_obj_type_t core_type(const hvds_topo_t* t) {
  return hwloc_get_nbobjs_by_type(t->t, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
}

static int rank_cpuset(const hvds_topo_t* t, const char* mode, int rank, int size,
                       hwloc_bitmap_t set) {
  hwloc_bitmap_zero(set);
  if (size < 1 || rank < 0 || rank >= size) return -1;
  if (strcmp(mode, "numa") == 0) {
    int n = hwloc_get_nbobjs_by_type(t->t, HWLOC_OBJ_NUMANODE);
    hwloc_obj_t node =
        n > 0 ? hwloc_get_obj_by_type(t->t, HWLOC_OBJ_NUMANODE, (unsigned)((long)rank * n / size))
              : NULL;
    hwloc_bitmap_copy(set, node ? node->cpuset : hwloc_topology_get_topology_cpuset(t->t));
    return 0;
  }
  if (strcmp(mode, "core") != 0) return -1;
  hwloc_obj_type_t type = core_type(t);
  int c = hwloc_get_nbobjs_by_type(t->t, type);
  if (c <= 0) return -1;
  int first = c >= size ? (int)((long)rank * c / size) : rank % c;
  int last = c >= size ? (int)((long)(rank + 1) * c / size) : first + 1;
  for (int i = first; i < last; i++)
    hwloc_bitmap_or(set, set, hwloc_get_obj_by_type(t->t, type, (unsigned)i)->cpuset);
  return 0;
}

hvds_result_t hvds__topo_rank_cpus(const hvds_topo_t* t, const char* mode, int local_rank,
                                   int local_size, char* list, size_t len) {
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  if (set == NULL) return HVDS_SYSTEM_ERROR;
  int rc = rank_cpuset(t, mode ? mode : "", local_rank, local_size, set);
  if (rc == 0) hwloc_bitmap_list_snprintf(list, len, set);
  hwloc_bitmap_free(set);
  return rc == 0 ? HVDS_SUCCESS : HVDS_INVALID_ARGUMENT;
}

int hvds__topo_gpu_for_rank(const hvds_topo_t* t, int local_rank, int local_size) {
  if (t->ngpus == 0 || local_rank < 0 || local_rank >= local_size) return -1;
  int used[MAX_GPUS] = {0}, mine = -1;
  hwloc_bitmap_t set = hwloc_bitmap_alloc(), both = hwloc_bitmap_alloc();
  for (int r = 0; r <= local_rank && set != NULL && both != NULL; r++) {
    rank_cpuset(t, "core", r, local_size, set);
    int least = used[0];
    for (int g = 1; g < t->ngpus; g++)
      if (used[g] < least) least = used[g];
    int best = -1, best_overlap = -1;
    for (int g = 0; g < t->ngpus; g++) {
      if (used[g] != least) continue;
      hwloc_bitmap_and(both, set, gpu_cpuset(t, g));
      int overlap = hwloc_bitmap_weight(both);
      if (overlap > best_overlap) best = g, best_overlap = overlap;
    }
    used[best]++;
    mine = best;
  }
  hwloc_bitmap_free(set);
  hwloc_bitmap_free(both);
  return mine;
}

void hvds__topo_print(const hvds_topo_t* t, int local_size, FILE* f) {
  hvds_topo_counts_t c;
  hvds__topo_counts(t, &c);
  fprintf(f,
          "Topology (hwloc %s):\n    %d package(s), %d NUMA node(s), %d core(s), %d PU(s), "
          "%d GPU(s)\n",
          HWLOC_VERSION, c.packages, c.numa_nodes, c.cores, c.pus, c.gpus);
  char list[256];
  for (int i = 0; i < c.numa_nodes; i++) {
    hwloc_obj_t n = hwloc_get_obj_by_type(t->t, HWLOC_OBJ_NUMANODE, (unsigned)i);
    hwloc_bitmap_list_snprintf(list, sizeof list, n->cpuset);
    fprintf(f, "    NUMA node %d: CPUs %s, %llu MiB\n", i, list,
            (unsigned long long)(n->attr->numanode.local_memory >> 20));
  }
  for (int i = 0; i < c.gpus; i++) {
    hvds_topo_gpu_t g;
    hvds__topo_gpu(t, i, &g);
    fprintf(f, "    GPU %d: %s%s%s%s, NUMA node %d, near CPUs %s\n", i, g.bus_id,
            g.name[0] ? " (" : "", g.name, g.name[0] ? ")" : "", g.numa, g.cpus);
  }
  if (local_size < 1) return;
  fprintf(f, "  With %d rank(s) on this host:\n", local_size);
  for (int r = 0; r < local_size; r++) {
    char numa[128] = "";
    hvds__topo_rank_cpus(t, "core", r, local_size, list, sizeof list);
    hvds__topo_rank_cpus(t, "numa", r, local_size, numa, sizeof numa);
    int g = hvds__topo_gpu_for_rank(t, r, local_size);
    char gpu[16] = "none";
    if (g >= 0) snprintf(gpu, sizeof gpu, "%d", g);
    fprintf(f, "    local rank %d: --bind-to core CPUs %s, --bind-to numa CPUs %s, GPU %s\n", r,
            list, numa, gpu);
  }
}

/* Set once "auto" bound this process: a later init (elastic) may move that binding. */
static int bound_here;

/* "auto" binds like "core" where the local ranks spread evenly over the cores (a core each, or
 * the same number on every core when they outnumber them) and nobody else (mpirun, taskset,
 * numactl, Slurm) has bound this process already: the ranks' threads then never share a core
 * with another rank's busy waits, which decides whether a small allreduce takes microseconds
 * or a scheduler slice, and ranks that must share cores keep the same partners all run long
 * (np 4 on 2 cores, 256 KiB: 52-95 us against 69-891 unbound). An uneven count stays unbound:
 * bound, the ranks of the fuller cores would compute slower than the scheduler lets them. */
static int auto_binds(const hvds_topo_t* t, int local_size) {
  if (local_size < 2) return 0;
  int cores = hwloc_get_nbobjs_by_type(t->t, core_type(t));
  if (cores < local_size && (cores < 2 || local_size % cores != 0)) return 0;
  if (bound_here) return 1;
  /* The calling thread too: a binding set on it alone (os.sched_setaffinity from Python after
   * the framework started its threads) is a choice to keep, though other threads still hold
   * every CPU (a sanitizer's background thread does). */
  hwloc_bitmap_t now = hwloc_bitmap_alloc();
  const hwloc_const_bitmap_t all = hwloc_topology_get_topology_cpuset(t->t);
  int whole = now != NULL && hwloc_get_cpubind(t->t, now, HWLOC_CPUBIND_PROCESS) == 0 &&
              hwloc_bitmap_isincluded(all, now) &&
              hwloc_get_cpubind(t->t, now, HWLOC_CPUBIND_THREAD) == 0 &&
              hwloc_bitmap_isincluded(all, now);
  hwloc_bitmap_free(now);
  return whole;
}

hvds_result_t hvds__topo_bind_self(const char* mode, int local_rank, int local_size, char* err,
                                   size_t errlen) {
  if (mode == NULL || mode[0] == '\0' || strcmp(mode, "none") == 0) return HVDS_SUCCESS;
  int automatic = strcmp(mode, "auto") == 0;
  if (strcmp(mode, "core") != 0 && strcmp(mode, "numa") != 0 && !automatic) {
    snprintf(err, errlen, "unknown binding '%s' (auto, core, numa or none)", mode);
    return HVDS_INVALID_ARGUMENT;
  }
  hvds_topo_t* t = NULL;
  hvds_result_t rc = hvds__topo_load(NULL, 0, &t, err, errlen);
  if (rc != HVDS_SUCCESS) return automatic ? HVDS_SUCCESS : rc;
  if (automatic) {
    if (!auto_binds(t, local_size)) {
      hvds__topo_free(t);
      return HVDS_SUCCESS;
    }
    mode = "core";
  }
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  if (set == NULL || rank_cpuset(t, mode, local_rank, local_size, set) != 0 ||
      hwloc_bitmap_iszero(set)) {
    snprintf(err, errlen, "no CPUs for local rank %d of %d", local_rank, local_size);
    rc = HVDS_INVALID_ARGUMENT;
  } else if (hwloc_set_cpubind(t->t, set, HWLOC_CPUBIND_PROCESS) != 0) {
    snprintf(err, errlen, "hwloc_set_cpubind failed");
    rc = HVDS_SYSTEM_ERROR;
  } else {
    bound_here = automatic;
  }
  hwloc_bitmap_free(set);
  hvds__topo_free(t);
  return automatic ? HVDS_SUCCESS : rc; /* auto is an optimisation: unbound is still right */
}

#else /* no hwloc: nothing to report, and binding is refused */

struct hvds_topo {
  int unused;
};

int hvds__topo_available(void) { return 0; }

hvds_result_t hvds__topo_load(const char* xml, size_t xml_len, hvds_topo_t** out, char* err,
                              size_t errlen) {
  *out = NULL;
  snprintf(err, errlen, "this build has no hwloc");
  return HVDS_NOT_SUPPORTED;
}

void hvds__topo_free(hvds_topo_t* t) { free(t); }

void hvds__topo_counts(const hvds_topo_t* t, hvds_topo_counts_t* out) {
  memset(out, 0, sizeof *out);
}

hvds_result_t hvds__topo_gpu(const hvds_topo_t* t, int i, hvds_topo_gpu_t* out) {
  memset(out, 0, sizeof *out);
  return HVDS_INVALID_ARGUMENT;
}

hvds_result_t hvds__topo_rank_cpus(const hvds_topo_t* t, const char* mode, int local_rank,
                                   int local_size, char* list, size_t len) {
  return HVDS_NOT_SUPPORTED;
}

int hvds__topo_gpu_for_rank(const hvds_topo_t* t, int local_rank, int local_size) { return -1; }

void hvds__topo_print(const hvds_topo_t* t, int local_size, FILE* f) {
  fprintf(f, "Topology: this build has no hwloc\n");
}

hvds_result_t hvds__topo_bind_self(const char* mode, int local_rank, int local_size, char* err,
                                   size_t errlen) {
  if (mode == NULL || mode[0] == '\0' || strcmp(mode, "none") == 0) return HVDS_SUCCESS;
  if (strcmp(mode, "auto") == 0) return HVDS_SUCCESS; /* nothing to know the cores by */
  snprintf(err, errlen, "this build has no hwloc");
  return HVDS_NOT_SUPPORTED;
}

#endif
