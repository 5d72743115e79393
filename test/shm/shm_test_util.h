// Helpers shared by the shared-memory transport tests: byte patterns, request shorthands, and
// the check of every collective over a communicator (../common/collectives_check.h).
#ifndef HVDS_TEST_SHM_TEST_UTIL_H_
#define HVDS_TEST_SHM_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "../common/collectives_check.h"
#include "../common/p2p_calls.h"
#include "collectives.h"
#include "p2p.h"

namespace shm_test {

using hvds_test::Byte;
using hvds_test::Clock;
using hvds_test::Irecv;
using hvds_test::Isend;
using hvds_test::Matches;
using hvds_test::MsSince;
using hvds_test::Pattern;
using hvds_test::sleep_ms;
using hvds_test::Wait;

using hvds_test::RunCollectives;

// Rank r's allreduce input element i; sums stay exact in float.
inline float In(int r, size_t i) { return hvds_test::CollectiveInput(r, i); }

}  // namespace shm_test

#endif  // HVDS_TEST_SHM_TEST_UTIL_H_
