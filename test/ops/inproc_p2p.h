// In-process point-to-point transport for tests: N ranks as threads of one process.
//
// isend copies the payload into a message at once (so sends complete immediately); the message
// is handed to the first receive posted by the destination for (source, tag), in posting order,
// or queued until one is. wait blocks on the destination's condition variable, with a timeout.
//
// Fault mode: inproc_kill() marks a rank dead. Waits on a receive from a dead rank that has no
// message yet fail with HVDS_REMOTE_ERROR, failed_peer set to it and the error naming it; sends
// to it fail the same way. Aborting a communicator kills its own rank, so peers fail at once.
// A communicator that failed or timed out stays failed: later calls return the same error.
#ifndef HVDS_TEST_INPROC_P2P_H_
#define HVDS_TEST_INPROC_P2P_H_

#include <functional>
#include <memory>

#include "p2p.h"

struct InprocWorld;

// A world of size ranks; each rank's communicator comes from inproc_comm().
std::shared_ptr<InprocWorld> inproc_world(int size);
// Creates rank's communicator (free it with hvds__p2p_destroy). timeout_ms is its default wait.
hvds_p2p_t* inproc_comm(const std::shared_ptr<InprocWorld>& world, int rank, int timeout_ms);
// Marks rank dead: its peers' pending and later waits on it fail.
void inproc_kill(InprocWorld* world, int rank);
// Number of messages sent but never received, over the whole world (0 after a clean test).
size_t inproc_pending_messages(InprocWorld* world);
// Payload bytes sent so far, over the whole world (what a transport would put on the wire).
size_t inproc_bytes_sent(InprocWorld* world);

// Runs fn(p) on size threads, one communicator each, and joins them. Communicators are
// destroyed after every thread returned.
void inproc_spawn(int size, const std::function<void(hvds_p2p_t*)>& fn, int timeout_ms = 30000);
// As above, on an existing world (for inproc_kill and inproc_pending_messages).
void inproc_spawn(const std::shared_ptr<InprocWorld>& world,
                  const std::function<void(hvds_p2p_t*)>& fn, int timeout_ms = 30000);

#endif  // HVDS_TEST_INPROC_P2P_H_
