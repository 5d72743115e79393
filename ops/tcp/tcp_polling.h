/* How long a wait of the tcp transport polls before it sleeps, chosen at init. */
#ifndef HVDS_RUNTIME_TCP_POLLING_H_
#define HVDS_RUNTIME_TCP_POLLING_H_

#ifdef __cplusplus
extern "C" {
#endif

/* The poll time for a knob value (HVDSPARSE_TCP_POLL_US; < 0: automatic): 50 us when every rank
 * has a core of its own, else 0 (a polling rank would take a core from a rank that computes).
 * Two counts must fit: this host's local ranks in the cores this process may use (cores: its
 * affinity mask capped by its container's CPU quota, cpu_budget.h), and the ranks that share this
 * machine's kernel (several hosts can be one machine: network namespaces, containers of one
 * node; 0 when unknown) in the machine's online cores. */
int hvds__tcp_poll_us(long long knob, int local_ranks, int machine_ranks, long cores,
                      long machine_cores);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_RUNTIME_TCP_POLLING_H_ */
