// Sparse allreduce through the runtime: `hvdsparse run -np N sparse_worker SCENARIO` over the
// TCP transport on loopback. Every run has a deadline; on expiry the launcher's process group
// (ours alone) is killed, so a hang fails the test.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "../common/run_command.h"

namespace {

RunResult RunScenario(int np, const std::string& scenario, std::vector<std::string> env = {},
                      int timeout_s = 180) {
  return RunCommand({HVDS_LAUNCHER, "run", "-np", std::to_string(np), HVDS_WORKER, scenario}, env,
                    timeout_s);
}

class SparseRtScenarios : public ::testing::TestWithParam<std::tuple<int, const char*>> {};

// Every scenario at np 1..4: COO and ROWS, int32 and int64 indices, sparse and dense outputs,
// Sum and Average, every algorithm, against each rank's own reference sum; errors on every rank.
TEST_P(SparseRtScenarios, PassOnEveryRank) {
  int np = std::get<0>(GetParam());
  std::string scenario = std::get<1>(GetParam());
  // A fixed network makes the cost model's choices the same on every machine.
  RunResult r = RunScenario(np, scenario, {"HVDSPARSE_NET_ALPHA_US=20", "HVDSPARSE_NET_GBPS=10"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(Count(r.output, "PASS " + scenario), np) << r.output;
}

INSTANTIATE_TEST_SUITE_P(Np, SparseRtScenarios,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4),
                                            ::testing::Values("basic", "alloc", "errors", "detect",
                                                              "process_sets", "join")),
                         [](const auto& info) {
                           return std::string(std::get<1>(info.param)) + "_np" +
                                  std::to_string(std::get<0>(info.param));
                         });

// Errors name the tensor on every rank, and the messages agree across ranks.
TEST(SparseRtErrors, SameMessageOnEveryRank) {
  RunResult r = RunScenario(3, "errors");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(Count(r.output,
                  "Mismatched SPARSE_ALLREDUCE tensor shapes: One rank sent a tensor of "
                  "shape [100], but another rank sent a tensor of shape [101]. "
                  "[tensor: err.shape; ranks 0 and 2]"),
            3)
      << r.output;
  EXPECT_EQ(Count(r.output,
                  "err.bad.zen: sparse allreduce: index 100 (position 1) on rank 2 is "
                  "outside the dense shape [0, 100)"),
            3)
      << r.output;
}

// HVDSPARSE_SPARSE_DETECT=1 is the default of options that leave sparse_detect at -1.
TEST(SparseRtDetect, KnobSetsTheDefault) {
  RunResult r = RunScenario(
      3, "detect_env",
      {"HVDSPARSE_SPARSE_DETECT=1", "HVDSPARSE_NET_ALPHA_US=20", "HVDSPARSE_NET_GBPS=10"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(Count(r.output, "PASS detect_env"), 3) << r.output;
}

// The algorithm knob forces what the call leaves open; the debug log shows the choice and costs.
TEST(SparseRtKnobs, AlgorithmKnobAndDebugLog) {
  RunResult r = RunScenario(
      2, "net", {"HVDSPARSE_SPARSE_ALGORITHM=ssar_split_allgather", "HVDSPARSE_LOG_LEVEL=DEBUG"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(Count(r.output, "sparse allreduce 'net': ssar_split_allgather (cost model picks"), 2)
      << r.output;
  EXPECT_NE(r.output.find("ZEN imbalance push"), std::string::npos) << r.output;
  // The bandwidth with every rank sending at once, which the model prices, is never above the
  // idle pair's.
  size_t at = r.output.find("for the sparse cost model: alpha");
  ASSERT_NE(at, std::string::npos) << r.output;
  double alpha_us = 0, pair = 0, loaded = 0;
  ASSERT_EQ(std::sscanf(r.output.c_str() + at,
                        "for the sparse cost model: alpha %lf us, %lf GB/s (%lf GB/s per rank",
                        &alpha_us, &pair, &loaded),
            3)
      << r.output.substr(at, 200);
  EXPECT_GT(loaded, 0);
  EXPECT_LE(loaded, pair);
}

// The network measured at init is rank 0's on every rank; the knobs replace it.
TEST(SparseRtNet, MeasuredValuesAgreeAndKnobsOverride) {
  RunResult r = RunScenario(4, "net");
  ASSERT_EQ(r.status, 0) << r.output;
  std::set<std::string> lines;
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);)
    if (line.find("NET alpha=") != std::string::npos)
      lines.insert(line.substr(line.find("NET alpha=")));
  EXPECT_EQ(Count(r.output, "NET alpha="), 4) << r.output;
  EXPECT_EQ(lines.size(), 1u) << r.output;
  r = RunScenario(2, "net", {"HVDSPARSE_NET_ALPHA_US=20", "HVDSPARSE_NET_GBPS=10"});
  ASSERT_EQ(r.status, 0) << r.output;
  char want[128];
  std::snprintf(want, sizeof want, "NET alpha=%a beta=%a", 20 * 1e-6, 8.0 / (10 * 1e9));
  EXPECT_EQ(Count(r.output, want), 2) << r.output;
}

// The timeline shows the negotiation, the operation and the algorithm as an activity with the
// model's view, and stays valid JSON.
TEST(SparseRtTimeline, AlgorithmActivityWithArgs) {
  char path[] = "/tmp/hvds_sparse_timeline_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  RunResult r = RunScenario(2, "timeline", {std::string("HVDSPARSE_TIMELINE=") + path});
  ASSERT_EQ(r.status, 0) << r.output;
  std::string text = ReadFile(path);
  for (const char* want :
       {"NEGOTIATE_SPARSE_ALLREDUCE", "\"SPARSE_ALLREDUCE\"", "\"SPARSE_ZEN\"", "\"predicted_ms\"",
        "\"density\"", "\"auto_pick\"", "\"overlap\":-1", "\"learned_overlap\"", "DENSE_DETECT",
        "\"ph\":\"X\"", "tl.auto", "detect.tl"})
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  RunResult v = RunCommand(
      {"/usr/bin/python3", "-c", std::string("import json; json.load(open('") + path + "'))"}, {},
      60);
  EXPECT_EQ(v.status, 0) << v.output;
  unlink(path);
}

// A name's second step gives the cost model the overlap its first step's union showed: 1 for
// identical supports, 0 for disjoint ones, also for sparse_detect and when rank 0 has joined
// (it learns without entries); every rank prints the same lines (overlap, learned value, pick,
// the selector's corrections: rank 0's), the pick is the least corrected prediction, a correction
// appears once an algorithm ran twice on a name, and the results are exact. One rank learns
// nothing.
class SparseRtOverlap : public ::testing::TestWithParam<int> {};

TEST_P(SparseRtOverlap, SecondStepUsesTheFirstStepsOverlap) {
  int np = GetParam();
  RunResult r = RunScenario(np, "overlap", {"HVDSPARSE_NET_ALPHA_US=20", "HVDSPARSE_NET_GBPS=10",
                                            "HVDSPARSE_SPARSE_LEARN_COSTS=1"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(Count(r.output, "PASS overlap"), np) << r.output;
  std::map<std::string, int> lines;  // each step's line, and how many ranks printed it
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);)
    if (line.find("OVERLAP ") != std::string::npos) lines[line.substr(line.find("OVERLAP "))]++;
  for (const auto& [line, n] : lines)
    EXPECT_EQ(n, line.find("ovl.join") != std::string::npos ? np - 1 : np) << line;
  EXPECT_EQ(lines.size(), np > 1 ? 10u : 8u) << r.output;  // one line per step: ranks agree
  std::string one = np > 1 ? "1.000" : "none", zero = np > 1 ? "0.000" : "none";
  std::string used1 = np > 1 ? "used 1.000" : "used uniform";
  EXPECT_EQ(Count(r.output, "OVERLAP ovl.same step 1: used uniform learned " + one), np);
  EXPECT_EQ(Count(r.output, "OVERLAP ovl.same step 2: " + used1), np);
  EXPECT_EQ(Count(r.output, "OVERLAP ovl.disjoint step 1: used uniform learned " + zero), np);
  EXPECT_EQ(Count(r.output, "OVERLAP ovl.detect step 2: " + used1), np);
  if (np > 1) {
    EXPECT_EQ(Count(r.output, "OVERLAP ovl.join step 2: used 1.000"), np - 1);
  }
}

INSTANTIATE_TEST_SUITE_P(Np, SparseRtOverlap, ::testing::Values(1, 3, 4),
                         [](const auto& info) { return "np" + std::to_string(info.param); });

// Over Gloo's pairs as well as the default transport.
// The sparse algorithms' dense steps (the dense baseline's allreduce, DSAR's gather, the
// gathers' rings) take the runtime's ring segment: tiny and odd segments still give every
// algorithm's exact result.
TEST(SparseRtKnobs, TinyRingSegmentsKeepEveryAlgorithmExact) {
  for (const char* chunk : {"HVDSPARSE_RING_CHUNK_BYTES=12", "HVDSPARSE_RING_CHUNK_BYTES=200"}) {
    RunResult r =
        RunScenario(3, "basic", {"HVDSPARSE_NET_ALPHA_US=20", "HVDSPARSE_NET_GBPS=10", chunk});
    ASSERT_EQ(r.status, 0) << chunk << "\n" << r.output;
    EXPECT_EQ(Count(r.output, "PASS basic"), 3) << chunk << "\n" << r.output;
  }
}

TEST(SparseRtTransports, GlooPairs) {
  RunResult r = RunScenario(3, "basic", {"HVDSPARSE_TRANSPORT=gloo"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(Count(r.output, "PASS basic"), 3) << r.output;
}

}  // namespace
