/* How many cores this process can keep busy at once: the CPUs of its affinity mask, capped by
 * the CPU quota of its cgroup (a container's CPU limit). A machine's core count alone overstates
 * it in a container limited to fewer CPUs than the machine has, and a transport that polls
 * there would spend the quota its ranks need for compute. */
#ifndef HVDS_RUNTIME_CPU_BUDGET_H_
#define HVDS_RUNTIME_CPU_BUDGET_H_

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  int cores;    /* min(cpus, quota rounded up), at least 1 */
  int cpus;     /* CPUs of the affinity mask (else online CPUs) */
  double quota; /* CPUs' worth of time the cgroup allows per period; 0: no limit found */
} hvds_cpu_budget_t;

/* This process's budget, read from /proc and the cgroup file systems on first use. The quota is
 * the smallest over the cgroup and its ancestors, cgroup v2 (cpu.max) and v1
 * (cpu.cfs_quota_us / cpu.cfs_period_us) alike. */
hvds_cpu_budget_t hvds__cpu_budget(void);

/* The same from explicit inputs (tests): the texts of /proc/self/cgroup and
 * /proc/self/mountinfo; root is prefixed to every mount point ("" for the real one). */
hvds_cpu_budget_t hvds__cpu_budget_from(int cpus, const char* cgroup, const char* mountinfo,
                                        const char* root);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_RUNTIME_CPU_BUDGET_H_ */
