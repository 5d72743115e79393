// Shared by the TCP transport tests: rank threads on a real loopback mesh, byte patterns, and
// short forms of the point-to-point calls.
#ifndef HVDS_TEST_TCP_TEST_UTIL_H_
#define HVDS_TEST_TCP_TEST_UTIL_H_

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "../common/p2p_calls.h"
#include "../common/rank_threads.h"

#include "tcp_p2p.h"

namespace tcp_test {

using hvds_test::Byte;
using hvds_test::Clock;
using hvds_test::Irecv;
using hvds_test::Isend;
using hvds_test::Matches;
using hvds_test::Pattern;
using hvds_test::sleep_ms;
using hvds_test::Wait;

inline double ms_since(Clock::time_point t0) { return hvds_test::MsSince(t0); }

using Gate = hvds_test::Barrier;
using RankFn = hvds_test::RankFn;

// Runs fn on size rank threads, each with a connected TCP communicator.
inline void RunRanks(int size, const RankFn& fn, int timeout_ms = 30000, bool destroy = true) {
  hvds_test::SpawnRanks(size, hvds__tcp_p2p_create, fn, timeout_ms, destroy);
}

}  // namespace tcp_test

#endif  // HVDS_TEST_TCP_TEST_UTIL_H_
