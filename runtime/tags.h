/* The tag layout of the runtime's messages, in one place. A tag is 64 bits; a sub-communicator
 * (p2p_sub.c: process sets, the local and cross groups) puts its space id in bits 48-63, so
 * every tag the runtime uses stays below 2^48.
 *   bits 0-39   a process set's operation sequence (hvds__next_tag): identical on every member,
 *               since every member runs the set's operations in the same order;
 *   bits 40, 41 added by the hierarchical allreduce to its operation's tag for its phases;
 *   2^39 + k    the exchanges at init, before any set operation runs (k below, one range each);
 *   1..3        the shared-memory group's own setup, on the local communicator. */
#ifndef HVDS_TAGS_H_
#define HVDS_TAGS_H_

#define HVDS_TAG_SEQ_MASK ((1ull << 40) - 1)
#define HVDS_TAG_HIER_ALLGATHER (1ull << 40)
#define HVDS_TAG_HIER_CROSS (1ull << 41)

#define HVDS_TAG_INIT (1ull << 39)
#define HVDS_TAG_INIT_GROUPS (HVDS_TAG_INIT + 0)      /* bootstrap: host names */
#define HVDS_TAG_INIT_TOPOLOGY (HVDS_TAG_INIT + 1)    /* launch_topology.c */
#define HVDS_TAG_INIT_NET_PROBE (HVDS_TAG_INIT + 16)  /* net_probe.c: + 0..7 */
#define HVDS_TAG_INIT_WORK_PROBE (HVDS_TAG_INIT + 24) /* work_probe.c: + 0..1 */

#define HVDS_TAG_LOCAL_AGREE 1   /* hierarchy.c, on the local group */
#define HVDS_TAG_LOCAL_BARRIER 2
#define HVDS_TAG_LOCAL_PROBE 3

#endif /* HVDS_TAGS_H_ */
