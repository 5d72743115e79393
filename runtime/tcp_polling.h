/* How long a wait of the tcp transport polls before it sleeps, chosen at init. */
#ifndef HVDS_RUNTIME_TCP_POLLING_H_
#define HVDS_RUNTIME_TCP_POLLING_H_

#ifdef __cplusplus
extern "C" {
#endif

/* The poll time for a knob value (HVDSPARSE_TCP_POLL_US; < 0: automatic): 50 us when every rank
 * sharing this machine's cores has one, else 0 (a polling rank would take a core from a rank that
 * computes). Ranks on one machine: the larger of this host's local ranks and the ranks that share
 * this machine's kernel. */
int hvds__tcp_poll_us(long long knob, int local_ranks, int machine_ranks, long cores);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_RUNTIME_TCP_POLLING_H_ */
