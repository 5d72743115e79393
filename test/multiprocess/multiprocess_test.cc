// Multi-process tests: `hvdsparse run -np N mp_worker SCENARIO` over real Gloo TCP on loopback.
// Each run has a deadline; on expiry the launcher's process group (ours alone) is killed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "../common/run_command.h"

namespace {

RunResult RunScenario(int np, const std::string& scenario, std::vector<std::string> env = {},
                      int timeout_s = 120) {
  return RunCommand({HVDS_LAUNCHER, "run", "-np", std::to_string(np), HVDS_WORKER, scenario}, env,
             timeout_s);
}

class Collectives
    : public ::testing::TestWithParam<std::tuple<int, const char*, const char*>> {};

// Every scenario at np 1..4, fused and unfused, over both transports.
TEST_P(Collectives, PassOnEveryRank) {
  int np = std::get<0>(GetParam());
  std::string scenario = std::get<1>(GetParam());
  std::string transport = std::get<2>(GetParam());
  for (int fusion = 0; fusion <= 1; fusion++) {
    RunResult r = RunScenario(np, scenario,
                              {fusion ? "HVDSPARSE_FUSION_THRESHOLD=134217728"
                                      : "HVDSPARSE_FUSION_THRESHOLD=0",
                               "HVDSPARSE_TRANSPORT=" + transport});
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(Count(r.output, "PASS " + scenario), np) << r.output;
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllNp, Collectives,
    ::testing::Combine(::testing::Values(1, 2, 3, 4),
                       ::testing::Values("basics", "allreduce", "allgather", "broadcast",
                                         "alltoall", "reducescatter", "barrier", "join", "errors",
                                         "reinit", "process_sets", "lane", "wake"),
                       ::testing::Values("tcp", "gloo")),
    [](const auto& info) {
      return std::string(std::get<1>(info.param)) + "_np" + std::to_string(std::get<0>(info.param)) +
             "_" + std::get<2>(info.param);
    });

// Over Gloo's pairs a rank learns of a broken connection only through an operation pending on
// that pair: survivors waiting on other peers may sit until the collective timeout, so here the
// launcher is what names the dead rank and ends the job (the default TCP transport also makes
// every survivor fail at once; see the test above).
TEST(Faults, KilledRankFailsOthersAndLauncherOverGloo) {
  RunResult r = RunScenario(4, "kill", {"HVDSPARSE_TRANSPORT=gloo"}, 60);
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.status, -1) << "hang: " << r.output;
  EXPECT_LT(r.seconds, 20) << r.output;
  EXPECT_NE(r.output.find("The first process to do so was:\nProcess name: 3"), std::string::npos)
      << r.output;
}

TEST(Timeline, ValidJsonWithExpectedEvents) {
  char path[] = "/tmp/hvds_timeline_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  // Over TCP: a one-host job's fused allreduces otherwise go through the shared segment with no
  // fusion buffer (SHM_ALLREDUCE instead of the MEMCPY_*_FUSION_BUFFER and GLOO_ALLREDUCE events).
  RunResult r = RunScenario(2, "allreduce",
                            {std::string("HVDSPARSE_TIMELINE=") + path,
                             "HVDSPARSE_TIMELINE_MARK_CYCLES=1", "HVDSPARSE_SHM=0"});
  ASSERT_EQ(r.status, 0) << r.output;
  std::string text = ReadFile(path);
  for (const char* want : {"start_time_since_epoch_in_micros", "NEGOTIATE_ALLREDUCE", "\"ALLREDUCE\"",
                           "ar.0.7.0.2", "CYCLE_START", "MEMCPY_IN_FUSION_BUFFER", "GLOO_ALLREDUCE"})
    EXPECT_NE(text.find(want), std::string::npos) << want;
  RunResult v = RunCommand({"/usr/bin/python3", "-c", std::string("import json; json.load(open('") + path + "'))"}, {}, 60);
  EXPECT_EQ(v.status, 0) << v.output;
  unlink(path);
}

// Autotune moves the fusion threshold and cycle time while allreduces run: every result stays
// right (every rank applies rank 0's values in the same cycle) and rank 0 logs the points.
TEST(Autotune, ScoresPointsAndResultsStayRight) {
  char path[] = "/tmp/hvds_autotune_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  RunResult r = RunScenario(2, "allreduce",
                            {"HVDSPARSE_AUTOTUNE=1", std::string("HVDSPARSE_AUTOTUNE_LOG=") + path,
                             "HVDSPARSE_AUTOTUNE_STEPS_PER_SAMPLE=1",
                             "HVDSPARSE_AUTOTUNE_WARMUP_SAMPLES=0",
                             "HVDSPARSE_AUTOTUNE_BAYES_OPT_MAX_SAMPLES=3"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(Count(r.output, "PASS allreduce rank"), 2) << r.output;
  std::ifstream in(path);
  std::string header, row;
  std::getline(in, header);
  EXPECT_EQ(header, "cycle_time_ms,tensor_fusion_threshold,score");
  int rows = 0;
  while (std::getline(in, row)) rows++;
  EXPECT_GE(rows, 1) << "no point scored";
  unlink(path);
}

TEST(Stall, WarningNamesMissingRankThenFails) {
  RunResult r = RunScenario(2, "stall",
                            {"HVDSPARSE_STALL_CHECK_TIME_SECONDS=1",
                             "HVDSPARSE_STALL_SHUTDOWN_TIME_SECONDS=3"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("Missing ranks:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1: [lonely]"), std::string::npos) << r.output;
}

// Every rank waiting on what no other rank submits ends with an error after the deadlock time,
// naming the missing ranks and tensors; a rank that is merely slow does not.
TEST(Stall, DeadlockEndsEveryWaitButASlowRankDoesNot) {
  RunResult r = RunScenario(3, "deadlock", {"HVDSPARSE_DEADLOCK_SHUTDOWN_SECONDS=3"}, 120);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(Count(r.output, "PASS deadlock rank"), 3) << r.output;
}

// Speed is a benchmark's business (bench/fusion_step.sh reports the step against one allreduce);
// this test checks that the thousand tensors are right and travel fused.
TEST(Fusion, ThousandSmallTensorsTravelFused) {
  // The timeline shows the small tensors negotiated one by one but reduced together.
  char path[] = "/tmp/hvds_fusion_timeline_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  RunResult t = RunScenario(2, "fusion", {std::string("HVDSPARSE_TIMELINE=") + path}, 240);
  ASSERT_EQ(t.status, 0) << t.output;
  std::string text = ReadFile(path);
  int most = 0;
  for (size_t p = text.find("\"fused_tensors\":"); p != std::string::npos;
       p = text.find("\"fused_tensors\":", p + 1))
    most = std::max(most, std::atoi(text.c_str() + p + 16));
  std::printf("largest fused allreduce in the timeline: %d tensors\n", most);
  EXPECT_GE(most, 100);
  unlink(path);
}

// Every rank counts the ranks on its machine (one kernel) for the tcp transport's polling.
TEST(TcpPolling, RanksCountTheirMachine) {
  RunResult r = RunScenario(3, "allreduce", {"HVDSPARSE_LOG_LEVEL=debug"});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(Count(r.output, "PASS allreduce rank"), 3) << r.output;
  EXPECT_EQ(Count(r.output, "ranks on this host, 3 on this machine"), 3) << r.output;
}

// --keep-freed-memory: every worker gets glibc's mmap off and its trim threshold raised, and the
// runtime runs as usual under them.
TEST(Launcher, KeepFreedMemoryReachesEveryWorker) {
  RunResult env = RunCommand({HVDS_LAUNCHER, "run", "-np", "2", "--keep-freed-memory", "/bin/sh",
                              "-c", "echo malloc $MALLOC_MMAP_MAX_ $MALLOC_TRIM_THRESHOLD_"},
                             {}, 60);
  ASSERT_EQ(env.status, 0) << env.output;
  EXPECT_EQ(Count(env.output, "malloc 0 17179869184"), 2) << env.output;
  RunResult r = RunCommand(
      {HVDS_LAUNCHER, "run", "-np", "3", "--keep-freed-memory", HVDS_WORKER, "allreduce"}, {}, 120);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(Count(r.output, "PASS allreduce rank"), 3) << r.output;
}

TEST(Faults, KilledRankFailsOthersAndLauncher) {
  // Marks this job's processes, so the check below sees none of another test's workers.
  std::string mark = "HVDS_TEST_JOB=kill-" + std::to_string(getpid());
  RunResult r = RunScenario(4, "kill", {mark}, 60);
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.status, -1) << "hang: " << r.output;
  EXPECT_LT(r.seconds, 20) << r.output;
  // Every survivor's error names the dead rank.
  EXPECT_GE(Count(r.output, "Root cause: rank 3 exited with signal 9"), 3) << r.output;
  // Nothing left running: no process carries this job's mark.
  RunResult ps = RunCommand(
      {"/bin/sh", "-c", "grep -lzx '" + mark + "' /proc/[0-9]*/environ 2>/dev/null || true"}, {},
      10);
  EXPECT_EQ(ps.output, "") << ps.output;
}

// A rank dies within the launcher's one-second look at who reached rendezvous, after a view in
// which only it had arrived (the others start 1.2 s late): the launcher must read the arrivals
// afresh before it decides that nobody left can explain the failure, so the survivors still get
// their moment to name the dead rank and nobody is reported as never having arrived.
TEST(Faults, AFailureJustAfterRendezvousStillLetsEverySurvivorNameIt) {
  RunResult r = RunCommand(
      {HVDS_LAUNCHER, "run", "-np", "4", "/bin/sh", "-c",
       "if [ \"$HVDSPARSE_RANK\" != 3 ]; then sleep 1.2; fi; exec \"$0\" kill", HVDS_WORKER},
      {}, 60);
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.status, -1) << "hang: " << r.output;
  EXPECT_GE(Count(r.output, "Root cause: rank 3 exited with signal 9"), 3) << r.output;
  EXPECT_EQ(r.output.find("never reached rendezvous"), std::string::npos) << r.output;
}

}  // namespace
