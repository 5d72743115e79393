/* The network as the sparse cost model sees it, measured once at init, and the other values the
 * sparse allreduce needs identical on every rank (ZEN's hash key). */
#ifndef HVDS_NET_PROBE_H_
#define HVDS_NET_PROBE_H_

#include <stdint.h>

#include "hvdsparse.h"

#ifdef __cplusplus
extern "C" {
#endif

struct hvds_p2p;

/* Collective over world (every rank calls it, before the coordinator starts). Rank 0 ping-pongs
 * with the last rank (on another host whenever the ranks span hosts, as the launchers number
 * them): small messages give alpha (seconds per message, half the median round trip), 1 MiB
 * messages give beta (seconds per byte). HVDSPARSE_NET_ALPHA_US and HVDSPARSE_NET_GBPS replace
 * the measurement (rank 0's settings; both set: nothing is measured). Rank 0's values are
 * broadcast, so *alpha and *beta are identical on every rank. A single rank measures nothing:
 * the overrides or the cost model's defaults. Blocks for a few round trips; fails only when the
 * communicator does (world->error says why). */
hvds_result_t hvds__net_probe(struct hvds_p2p* world, double* alpha /* OUT */,
                              double* beta /* OUT */);

/* Collective over world: every rank at once exchanges 8 bytes with its ring neighbours, 16
 * times after 2 warm-ups; *round is the slowest rank's time per exchange less alpha: what a
 * step that must wait for its peer to be scheduled and woken costs beyond a message (on shared
 * cores, far more than the idle ping-pong's alpha). 0 for a single rank, or when alpha is
 * given (HVDSPARSE_NET_ALPHA_US). */
hvds_result_t hvds__round_probe(struct hvds_p2p* world, double alpha, double* round /* OUT */);

/* Collective over world: every rank at once sends 1 MiB to the next rank of a ring while it
 * receives 1 MiB from the one before, 3 times after a warm-up; *loaded is seconds per byte of
 * the slowest rank's fastest exchange less alpha, never below beta (the idle pair's). The dense
 * allreduce and the sparse algorithms' exchanges move their bytes so, every rank at once, and
 * ranks that share cores (or a link) then move less each than an idle pair: on the development
 * VM, 8 ranks on 2 cores behind 10 Gbit/s links, about a quarter. beta itself when given
 * (HVDSPARSE_NET_GBPS) or for a single rank. */
hvds_result_t hvds__load_probe(struct hvds_p2p* world, double alpha, double beta,
                               double* loaded /* OUT */);

/* Collective over world: rank 0 draws a random 64-bit key (never 0) and broadcasts it, so every
 * rank passes the same ZEN seed. */
hvds_result_t hvds__sparse_agree_seed(struct hvds_p2p* world, uint64_t* seed /* OUT */);

/* Init step: the probe and the seed into the runtime singleton, and the sparse knobs
 * (HVDSPARSE_SPARSE_ALGORITHM, _SPARSE_DETECT, _SPARSE_PACK_INDICES). On failure records the message for
 * hvds_last_error(). */
hvds_result_t hvds__sparse_runtime_init(void);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_NET_PROBE_H_ */
