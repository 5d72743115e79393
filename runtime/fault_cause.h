/* Root cause of a communication failure: which rank the failure started at.
 *
 * When a rank dies its peers see closed connections at once; when a rank hangs (stopped,
 * swapping, stuck in user code) its peers time out, and the ranks waiting on those peers time out
 * or see them abort in turn, so the rank a survivor names first is often only the next link in a
 * chain. Every rank that fails therefore publishes whom it lost and how, and then follows the
 * chain of such reports through the store to the first rank that reported nothing: that rank
 * died (the launcher says how, when there is one) or stopped responding.
 */
#ifndef HVDS_FAULT_CAUSE_H_
#define HVDS_FAULT_CAUSE_H_

#include <stddef.h>

#include "hvdsparse.h"
#include "store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Publishes this rank's report under "<job>/g<generation>/blame/<rank>": the global rank of the
 * peer it lost (peer, -1 when unknown) and whether it timed out waiting for it (rc is
 * HVDS_TIMEOUT) or lost its connection. Then follows the reports, for at most about a second per
 * rank that has not reported yet, or, when they loop back, waits for every rank's report, and
 * writes " Root cause: ..." into out ("" when nothing can be concluded). `launcher_key` is where
 * the launcher records the first worker that exited ("rank N exited with ..."), NULL when no
 * launcher records one. A rank found unresponsive is written to "hvds/<job>/silent". Blocks for
 * about three seconds at most plus the store round trips, each of which gives up after 2 s without
 * a reply (and then the connection, so the rest fail at once): a store that stopped answering costs
 * 2 s, never a hang. Accepts a NULL store. */
void hvds__fault_root_cause(hvds_store_t* store, const char* job, int generation, int rank,
                            int size, int peer, hvds_result_t rc, const char* launcher_key,
                            char* out, size_t outlen);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_FAULT_CAUSE_H_ */
