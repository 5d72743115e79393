// The runtime over shared memory and the hierarchical allreduce, end to end: jobs of real
// processes started torchrun-style (test/launch_env/jobs.h), with "hosts" made by giving ranks
// different HVDSPARSE_HOSTNAMEs on this one machine, each running hier_worker (allreduces of
// every size class through whatever path the job's layout selects, checked).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "jobs.h"

namespace {

using launch_test::Engine;
using launch_test::JobResult;
using launch_test::JobSpec;

int Count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) n++;
  return n;
}

// np ranks, rank r on host r / per_host (hosts differ by name only), plus env for every rank.
JobResult RunJobOn(int np, int per_host, std::vector<std::string> env) {
  JobSpec s;
  s.engine = Engine::kTorchrun;
  s.np = np;
  s.argv = {HVDS_HIER_WORKER};
  s.env = env;
  s.rank_env = [per_host](int r) -> std::vector<std::string> {
    return {"HVDSPARSE_HOSTNAME=host" + std::to_string(r / per_host),
            "LOCAL_RANK=", "LOCAL_WORLD_SIZE="};
  };
  s.timeout_s = 240;
  return launch_test::RunJob(s);
}

void ExpectMode(const JobResult& r, int np, const std::string& line) {
  ASSERT_FALSE(r.timed_out) << r.AllOutput();
  ASSERT_TRUE(r.AllExitedZero()) << r.AllOutput();
  EXPECT_EQ(Count(r.AllOutput(), line), np) << r.AllOutput();
}

// Every rank on one host: the world itself is shared memory, allreduces go through the segment.
TEST(Hierarchy, OneHostSharedMemoryWorld) {
  ExpectMode(RunJobOn(4, 4, {}), 4, "mode 4 world shm local sub");
}

// ... unless shared memory is off: TCP throughout, flat.
TEST(Hierarchy, OneHostShmOff) {
  ExpectMode(RunJobOn(4, 4, {"HVDSPARSE_SHM=0"}), 4, "mode 0 world tcp local sub");
}

// Gloo's world keeps its pairs; the allreduce still goes through the local segment.
TEST(Hierarchy, OneHostGlooWorldAllreduceThroughSegment) {
  ExpectMode(RunJobOn(4, 4, {"HVDSPARSE_TRANSPORT=gloo"}), 4, "mode 3 world gloo local shm");
}

// Two hosts of two, hierarchical forced: the two-host pipeline (shared memory inside a host).
TEST(Hierarchy, TwoHostsPipelined) {
  ExpectMode(RunJobOn(4, 2, {"HVDSPARSE_HIERARCHICAL_ALLREDUCE=1"}), 4,
             "mode 1 world tcp local shm");
}

// Three hosts of two: the three phases one after the other.
TEST(Hierarchy, ThreeHostsPhases) {
  ExpectMode(RunJobOn(6, 2, {"HVDSPARSE_HIERARCHICAL_ALLREDUCE=1"}), 6,
             "mode 1 world tcp local shm");
}

// Hierarchical over TCP alone (the local phase on the TCP view).
TEST(Hierarchy, TwoHostsWithoutSharedMemory) {
  ExpectMode(RunJobOn(4, 2, {"HVDSPARSE_HIERARCHICAL_ALLREDUCE=1", "HVDSPARSE_SHM=0"}), 4,
             "mode 1 world tcp local sub");
}

// Left to the cost model (links measured at init): the same answers whichever path it picks.
TEST(Hierarchy, TwoHostsCostModel) {
  ExpectMode(RunJobOn(4, 2, {}), 4, "mode 2 world tcp local shm");
}

// Explicitly off: flat over the world, shared memory still set up for the host.
TEST(Hierarchy, TwoHostsOff) {
  ExpectMode(RunJobOn(4, 2, {"HVDSPARSE_HIERARCHICAL_ALLREDUCE=0"}), 4,
             "mode 0 world tcp local shm");
}

// Hosts of different sizes (2 + 1): no hierarchy possible, flat and right.
TEST(Hierarchy, UnevenHostsFallBackToFlat) {
  ExpectMode(RunJobOn(3, 2, {"HVDSPARSE_HIERARCHICAL_ALLREDUCE=1"}), 3, "mode 0 world tcp");
}

}  // namespace
