// The rendezvous store dies while the job starts: every worker must fail with an error that says
// the store is gone (not hang, not crash, not blame a peer), promptly for the ranks that were
// connected and within the start timeout for those that were not yet.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>

#include "harness.h"

namespace {

constexpr double kStartTimeoutS = 6;

// Server-side connections established on 127.0.0.1:port (IPv4 and IPv6 tables).
int Established(int port) {
  int n = 0;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      char local[128], remote[128];
      unsigned state;
      if (sscanf(line.c_str(), "%*d: %127s %127s %x", local, remote, &state) != 3) continue;
      const char* colon = strrchr(local, ':');
      if (colon && strtol(colon + 1, nullptr, 16) == port && state == 1) n++;
    }
  }
  return n;
}

// Waits until none of pids is alive (they are orphans now, nobody reaps them but init).
bool AllGone(const std::map<int, pid_t>& pids, double timeout_s) {
  double until = rel::WallNow() + timeout_s;
  for (;;) {
    bool any = false;
    for (const auto& [r, pid] : pids) any |= rel::Alive(pid, "rel_worker");
    if (!any) return true;
    if (rel::WallNow() > until) return false;
    usleep(50000);
  }
}

void KillLeftovers(const std::map<int, pid_t>& pids) {
  for (const auto& [r, pid] : pids)
    if (rel::Alive(pid, "rel_worker")) kill(pid, SIGKILL);
}

// Rank r's init error as the worker wrote it to its file.
std::string InitError(const std::string& dir, int r) {
  return rel::ReadFile(dir + "/rank" + std::to_string(r) + ".txt");
}

// The launcher (which serves the store) is killed with -9 while ranks 0-2 wait at the
// rendezvous for rank 3, whose start is delayed. The launcher makes each worker's parent-death
// signal SIGKILL (launcher/spawn.c), so every worker, the waiting ones and the one not yet in
// init, ends with it at once: nobody is left waiting for a store that is gone. (Their output
// went with the launcher; the torchrun-style test below checks the errors a worker gives when
// only the store dies.)
TEST(Startup, LauncherKilledBeforeEveryRankArrived) {
  std::string dir = rel::TempDir("startup");
  rel::Proc job({HVDS_LAUNCHER, "run", "--verbose", "-np", "4", HVDS_REL_WORKER, "startup"},
                {"REL_DELAY_RANK=3", "REL_DELAY_MS=3000", "REL_ERROR_DIR=" + dir,
                 "HVDSPARSE_START_TIMEOUT=" + std::to_string((int)kStartTimeoutS)});
  ASSERT_TRUE(job.WaitFor("3/4 ranks reached rendezvous", 60)) << job.output();
  // Rank 3 printed its pid before its delay, but the launcher forwards it through a pipe: the
  // line can come after the launcher's own rendezvous message.
  ASSERT_TRUE(job.WaitFor("PID rank=3", 30)) << job.output();
  std::map<int, pid_t> pids = rel::WorkerPids(job.lines());
  ASSERT_EQ(pids.size(), 4u) << job.output();
  double t_kill = rel::WallNow();
  kill(job.pid(), SIGKILL);
  EXPECT_EQ(job.Wait(10), 128 + SIGKILL);
  bool gone = AllGone(pids, kStartTimeoutS + 15);
  double took = rel::WallNow() - t_kill;
  KillLeftovers(pids);
  EXPECT_TRUE(gone) << "workers still running " << took << " s after the launcher died";
  EXPECT_LT(took, 2.0) << "the workers outlived the launcher by " << took << " s";
  std::printf("every worker gone %.2f s after the launcher was killed\n", took);
  rel::RemoveTree(dir);
}

// Under a torchrun-style environment rank 0 serves the store; it dies while ranks 1 and 2 wait
// at the rendezvous, before rank 3 has started.
TEST(Startup, RankZeroServingTheStoreKilled) {
  std::string dir = rel::TempDir("startup0");
  int port = rel::FreePort();
  auto env = [&](int r) {
    return std::vector<std::string>{
        "RANK=" + std::to_string(r), "WORLD_SIZE=4", "LOCAL_RANK=" + std::to_string(r),
        "LOCAL_WORLD_SIZE=4", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port),
        "REL_ERROR_DIR=" + dir, "HVDSPARSE_START_TIMEOUT=" + std::to_string((int)kStartTimeoutS)};
  };
  std::vector<std::unique_ptr<rel::Proc>> ranks;
  for (int r = 0; r < 3; r++)
    ranks.push_back(std::make_unique<rel::Proc>(
        std::vector<std::string>{HVDS_REL_WORKER, "startup"}, env(r)));
  // Ranks 0, 1 and 2 are connected to the store when it serves three connections, steadily: a
  // short-lived connection (a probe while a rank starts) can make the count touch 3 earlier.
  double until = rel::WallNow() + 30;
  int steady = 0;
  while (steady < 5 && rel::WallNow() < until) {
    steady = Established(port) >= 3 ? steady + 1 : 0;
    usleep(20000);
  }
  ASSERT_GE(steady, 5) << "the ranks never connected to rank 0's store";
  usleep(200000);
  double t_kill = rel::WallNow();
  kill(ranks[0]->pid(), SIGKILL);
  ranks.push_back(std::make_unique<rel::Proc>(
      std::vector<std::string>{HVDS_REL_WORKER, "startup"}, env(3)));
  EXPECT_EQ(ranks[0]->Wait(10), 128 + SIGKILL);
  for (int r = 1; r < 4; r++) {
    int rc = ranks[r]->Wait(kStartTimeoutS + 15);
    double took = ranks[r]->exit_time() - t_kill;
    std::string err = InitError(dir, r);
    std::printf("rank %d: exit %d after %.2f s: %s", r, rc, took, err.c_str());
    EXPECT_EQ(rc, 3) << ranks[r]->output();
    EXPECT_NE(err.find("rendezvous store"), std::string::npos) << ranks[r]->output();
    if (r < 3) {
      EXPECT_LT(took, 3.0) << "rank " << r << " was connected and should fail at once";
      EXPECT_NE(err.find("closed"), std::string::npos) << err;
    } else {
      EXPECT_LT(took, kStartTimeoutS + 5);
    }
  }
  rel::RemoveTree(dir);
}

}  // namespace
