// Jobs started without `hvdsparse run` (docs/launching.md): four workers under mpirun, with a
// Slurm-like environment, a torchrun-style one and MPICH's (PMI) find each other through rank
// 0's own store, run the scenarios of test/multiprocess/worker.c, and learn the right local and
// cross identity. A launcher that names no rank, a wrong secret and a rank that never starts
// each end the job within the start timeout, with a message that names the cause.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "jobs.h"

namespace launch_test {
namespace {

bool Have(const char* path) { return path[0] != '\0'; }

int Count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) n++;
  return n;
}

#define SKIP_WITHOUT_MPIRUN(engine) \
  if ((engine) == Engine::kMpirun && !Have(HVDS_MPIRUN)) GTEST_SKIP() << "no mpirun found"

// ---- every collective, under each engine ----

class Collectives : public ::testing::TestWithParam<std::tuple<Engine, const char*>> {};

TEST_P(Collectives, PassOnEveryRank) {
  Engine engine = std::get<0>(GetParam());
  std::string scenario = std::get<1>(GetParam());
  SKIP_WITHOUT_MPIRUN(engine);
  JobSpec s;
  s.engine = engine;
  s.argv = {HVDS_WORKER, scenario};
  JobResult r = RunJob(s);
  ASSERT_FALSE(r.timed_out) << r.AllOutput();
  EXPECT_TRUE(r.AllExitedZero()) << r.AllOutput();
  EXPECT_EQ(Count(r.AllOutput(), "PASS " + scenario + " rank"), 4) << r.AllOutput();
}

INSTANTIATE_TEST_SUITE_P(
    FourRanks, Collectives,
    ::testing::Combine(::testing::Values(Engine::kMpirun, Engine::kSlurm, Engine::kTorchrun),
                       ::testing::Values("basics", "allreduce", "allgather", "broadcast",
                                         "alltoall", "reducescatter", "barrier", "join", "errors",
                                         "reinit", "process_sets")),
    [](const auto& info) {
      return std::string(EngineName(std::get<0>(info.param))) + "_" + std::get<1>(info.param);
    });

// MPICH's and Intel MPI's mpiexec (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS).
INSTANTIATE_TEST_SUITE_P(
    Pmi, Collectives,
    ::testing::Combine(::testing::Values(Engine::kPmi),
                       ::testing::Values("basics", "allreduce", "errors", "reinit",
                                         "process_sets")),
    [](const auto& info) {
      return std::string(EngineName(std::get<0>(info.param))) + "_" + std::get<1>(info.param);
    });

// The transport is independent of the engine; Gloo's pairs once, under the Slurm-like start.
TEST(Transport, GlooAllreduceSlurmStyle) {
  JobSpec s;
  s.engine = Engine::kSlurm;
  s.argv = {HVDS_WORKER, "allreduce"};
  s.env = {"HVDSPARSE_TRANSPORT=gloo"};
  JobResult r = RunJob(s);
  ASSERT_FALSE(r.timed_out) << r.AllOutput();
  EXPECT_TRUE(r.AllExitedZero()) << r.AllOutput();
  EXPECT_EQ(Count(r.AllOutput(), "PASS allreduce rank"), 4) << r.AllOutput();
}

// ---- identity ----

struct Identity {
  int rank = -1, size = -1, local_rank = -1, local_size = -1, cross_rank = -1, cross_size = -1;
};

// One Identity per "IDENTITY ..." line, indexed by rank; size() != np when a rank is missing.
std::vector<Identity> Identities(const JobResult& r, int np) {
  std::vector<Identity> by_rank(np);
  int found = 0;
  std::string all = r.AllOutput();
  for (size_t p = all.find("IDENTITY "); p != std::string::npos; p = all.find("IDENTITY ", p + 1)) {
    Identity id;
    if (std::sscanf(all.c_str() + p,
                    "IDENTITY rank=%d size=%d local_rank=%d local_size=%d cross_rank=%d "
                    "cross_size=%d",
                    &id.rank, &id.size, &id.local_rank, &id.local_size, &id.cross_rank,
                    &id.cross_size) == 6 &&
        id.rank >= 0 && id.rank < np) {
      by_rank[id.rank] = id;
      found++;
    }
  }
  if (found != np) by_rank.clear();
  return by_rank;
}

// Expected identity of rank r when ranks fill hosts of per_host slots in order.
void ExpectIdentity(const Identity& id, int r, int np, int per_host) {
  EXPECT_EQ(id.size, np);
  EXPECT_EQ(id.local_rank, r % per_host) << "rank " << r;
  EXPECT_EQ(id.local_size, per_host) << "rank " << r;
  EXPECT_EQ(id.cross_rank, r / per_host) << "rank " << r;
  EXPECT_EQ(id.cross_size, np / per_host) << "rank " << r;
}

class Engines : public ::testing::TestWithParam<Engine> {};

// Runs s (four ranks) and checks every rank's identity: rank r of 4, local size local_size.
void ExpectFourRanks(const JobSpec& s, int local_size) {
  JobResult r = RunJob(s);
  ASSERT_FALSE(r.timed_out) << r.AllOutput();
  ASSERT_TRUE(r.AllExitedZero()) << r.AllOutput();
  std::vector<Identity> ids = Identities(r, 4);
  ASSERT_EQ(ids.size(), 4u) << r.AllOutput();
  for (int rank = 0; rank < 4; rank++) ExpectIdentity(ids[rank], rank, 4, local_size);
}

TEST_P(Engines, OneHostGivesLocalSizeFourCrossSizeOne) {
  SKIP_WITHOUT_MPIRUN(GetParam());
  JobSpec s;
  s.engine = GetParam();
  s.argv = {HVDS_IDENTITY_WORKER};
  ExpectFourRanks(s, 4);
}

INSTANTIATE_TEST_SUITE_P(FourRanks, Engines,
                         ::testing::Values(Engine::kMpirun, Engine::kSlurm, Engine::kTorchrun,
                                           Engine::kPmi),
                         [](const auto& info) { return std::string(EngineName(info.param)); });

// Two "hosts" of two ranks each (named by the knob or by Slurm), and no local size from the
// engine: local size and cross identity come from the host names every rank publishes.
TEST(Topology, TorchrunStyleTwoHostsWithoutLocalRankOrSize) {
  JobSpec s;
  s.engine = Engine::kTorchrun;
  s.argv = {HVDS_IDENTITY_WORKER};
  s.rank_env = [](int r) -> std::vector<std::string> {
    return {"HVDSPARSE_HOSTNAME=host" + std::to_string(r / 2), "LOCAL_RANK=", "LOCAL_WORLD_SIZE="};
  };
  ExpectFourRanks(s, 2);
}

TEST(Topology, SlurmTwoNodes) {
  JobSpec s;
  s.engine = Engine::kSlurm;
  s.argv = {HVDS_IDENTITY_WORKER};
  s.rank_env = [](int r) -> std::vector<std::string> {
    return {"SLURMD_NODENAME=node" + std::to_string(r / 2),
            "SLURM_LOCALID=" + std::to_string(r % 2), "SLURM_NODELIST=localhost,127.0.0.1"};
  };
  ExpectFourRanks(s, 2);
}

// ---- the store's secret and a missing address ----

TEST(Secret, SharedSecretWorksAndAWrongOneIsRefused) {
  JobSpec s;
  s.engine = Engine::kTorchrun;
  s.argv = {HVDS_IDENTITY_WORKER};
  s.env = {"HVDSPARSE_SECRET=0123456789abcdef"};
  JobResult ok = RunJob(s);
  ASSERT_FALSE(ok.timed_out) << ok.AllOutput();
  EXPECT_TRUE(ok.AllExitedZero()) << ok.AllOutput();

  s.env.push_back("HVDSPARSE_START_TIMEOUT=3");
  s.env.push_back("HVDSPARSE_GLOO_TIMEOUT_SECONDS=3");
  s.rank_env = [](int r) -> std::vector<std::string> {
    if (r == 3) return {"HVDSPARSE_SECRET=not-the-secret"};
    return {};
  };
  JobResult bad = RunJob(s);
  ASSERT_FALSE(bad.timed_out) << bad.AllOutput();
  EXPECT_NE(bad.status[3], 0) << bad.AllOutput();
  EXPECT_NE(bad.output[3].find("refused this job's secret"), std::string::npos) << bad.AllOutput();
}

TEST(Errors, TorchrunStyleWithoutMasterAddrSaysWhatIsMissing) {
  JobSpec s;
  s.engine = Engine::kTorchrun;
  s.np = 2;
  s.argv = {HVDS_IDENTITY_WORKER};
  s.rank_env = [](int) -> std::vector<std::string> { return {"MASTER_ADDR="}; };
  JobResult r = RunJob(s);
  ASSERT_FALSE(r.timed_out) << r.AllOutput();
  for (int rank = 0; rank < 2; rank++) {
    EXPECT_NE(r.status[rank], 0) << r.AllOutput();
    EXPECT_NE(r.output[rank].find("MASTER_ADDR"), std::string::npos) << r.AllOutput();
  }
}

// ---- MPICH's mpiexec (Hydra): no job id in the environment ----

// A directory holding `hydra_pmi_proxy`, a link to /bin/sh: started through it, a shell shows
// the name Hydra's per-host proxy has, the parent of every rank it starts.
std::string FakeHydraProxy() {
  char dir[] = "/tmp/hvds_hydra_XXXXXX";
  if (mkdtemp(dir) == nullptr) return "";
  std::string proxy = std::string(dir) + "/hydra_pmi_proxy";
  if (symlink("/bin/sh", proxy.c_str()) != 0) return "";
  return proxy;
}

TEST(Pmi, RanksOfOneHydraProxyNameTheJobByIt) {
  std::string proxy = FakeHydraProxy();
  ASSERT_NE(proxy, "");
  // As Hydra's proxy: four ranks with PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS and
  // PMI_FD, and no job id and no port.
  std::string script =
      "for r in 0 1 2 3; do PMI_RANK=$r PMI_SIZE=4 MPI_LOCALRANKID=$r MPI_LOCALNRANKS=4 "
      "PMI_FD=9 \"$0\" allreduce & done; wait";
  JobResult r = RunLauncher({proxy, "-c", script, HVDS_WORKER}, {}, 90);
  ASSERT_FALSE(r.timed_out) << r.AllOutput();
  EXPECT_EQ(Count(r.AllOutput(), "PASS allreduce rank"), 4) << r.AllOutput();
  unlink(proxy.c_str());
  rmdir(proxy.substr(0, proxy.rfind('/')).c_str());
}

TEST(Pmi, RealHydraMpiexec) {
  if (!Have(HVDS_HYDRA)) GTEST_SKIP() << "no MPICH mpiexec (mpiexec.hydra) found";
  JobResult r = RunLauncher({HVDS_HYDRA, "-n", "4", HVDS_WORKER, "allreduce"}, {}, 120);
  ASSERT_FALSE(r.timed_out) << r.AllOutput();
  EXPECT_TRUE(r.AllExitedZero()) << r.AllOutput();
  EXPECT_EQ(Count(r.AllOutput(), "PASS allreduce rank"), 4) << r.AllOutput();
}

// ---- a launcher that started several processes without naming this one ----

TEST(Errors, ALauncherThatNamesNoRankIsAnErrorNotSizeOne) {
  struct Case {
    std::vector<std::string> env;
    const char* says;
  } cases[] = {
      {{"PMI_SIZE=4"}, "PMI_RANK, which names this one, is not set"},
      {{"MPI_LOCALNRANKS=2", "PMI_FD=7"}, "PMI_RANK, which names this one, is not set"},
      {{"PMI_FD=7"}, "PMI_FD is set"},
      {{"WORLD_SIZE=8"}, "RANK, which names this one, is not set"},
      {{"PMIX_RANK=1", "PMIX_NAMESPACE=prte-x@1"}, "no variable gives the job's size"},
  };
  for (const Case& c : cases) {
    JobResult r = RunLauncher({HVDS_IDENTITY_WORKER}, c.env, 30);
    ASSERT_FALSE(r.timed_out) << r.AllOutput();
    EXPECT_EQ(r.status[0], 1) << r.AllOutput();
    EXPECT_NE(r.output[0].find(c.says), std::string::npos) << r.AllOutput();
    EXPECT_EQ(r.output[0].find("IDENTITY"), std::string::npos) << r.AllOutput();
  }
}

// ---- start-up failures end within the start timeout (not the collectives' 30 s) ----

constexpr int kStartTimeout = 5;
// What a loaded machine may add: process start, teardown, the store's brief linger.
constexpr double kSlackSeconds = 4;

TEST(StartTimeout, AWrongSecretEndsEveryRankWithinIt) {
  JobSpec s;
  s.engine = Engine::kTorchrun;
  s.argv = {HVDS_IDENTITY_WORKER};
  s.env = {"HVDSPARSE_SECRET=0123456789abcdef",
           "HVDSPARSE_START_TIMEOUT=" + std::to_string(kStartTimeout)};
  s.rank_env = [](int r) -> std::vector<std::string> {
    if (r == 3) return {"HVDSPARSE_SECRET=not-the-secret"};
    return {};
  };
  s.timeout_s = 40;
  JobResult r = RunJob(s);
  ASSERT_FALSE(r.timed_out) << r.AllOutput();
  for (int rank = 0; rank < 4; rank++) {
    EXPECT_NE(r.status[rank], 0) << r.AllOutput();
    EXPECT_LT(r.seconds[rank], kStartTimeout + kSlackSeconds) << "rank " << rank << "\n"
                                                              << r.AllOutput();
  }
  EXPECT_NE(r.output[3].find("refused this job's secret"), std::string::npos) << r.AllOutput();
  EXPECT_NE(r.output[0].find("rank 3 never published"), std::string::npos) << r.AllOutput();
  EXPECT_NE(r.output[0].find("refused 1 connection"), std::string::npos) << r.AllOutput();
  EXPECT_NE(r.output[1].find("within the start timeout"), std::string::npos) << r.AllOutput();
}

// Rank 3 never gets to init (it sleeps); the others end, naming it, within the start timeout.
std::vector<std::string> Rank3NeverStarts(const char* rank_var) {
  return {"/bin/sh", "-c",
          std::string("if [ \"$") + rank_var + "\" = 3 ]; then exec sleep 600; fi; exec \"$0\"",
          HVDS_IDENTITY_WORKER};
}

TEST(StartTimeout, ARankThatNeverStartsEndsTheOthersWithinIt) {
  JobSpec s;
  s.engine = Engine::kTorchrun;
  s.argv = Rank3NeverStarts("RANK");
  s.env = {"HVDSPARSE_START_TIMEOUT=" + std::to_string(kStartTimeout)};
  s.timeout_s = kStartTimeout + 10;  // then the harness kills the sleeping rank 3
  JobResult r = RunJob(s);
  for (int rank = 0; rank < 3; rank++) {
    EXPECT_NE(r.status[rank], 0) << r.AllOutput();
    EXPECT_GE(r.seconds[rank], 0) << "rank " << rank << " still running\n" << r.AllOutput();
    EXPECT_LT(r.seconds[rank], kStartTimeout + kSlackSeconds) << "rank " << rank << "\n"
                                                              << r.AllOutput();
    EXPECT_NE(r.output[rank].find("rank 3 never published"), std::string::npos) << r.AllOutput();
  }
}

TEST(StartTimeout, UnderMpirunARankThatNeverStartsEndsTheJobWithinIt) {
  if (!Have(HVDS_MPIRUN)) GTEST_SKIP() << "no mpirun found";
  JobSpec s;
  s.engine = Engine::kMpirun;
  s.argv = Rank3NeverStarts("OMPI_COMM_WORLD_RANK");
  s.env = {"HVDSPARSE_START_TIMEOUT=" + std::to_string(kStartTimeout)};
  s.timeout_s = 60;
  JobResult r = RunJob(s);
  ASSERT_FALSE(r.timed_out) << r.AllOutput();
  EXPECT_NE(r.status[0], 0) << r.AllOutput();
  // mpirun ends the job once a rank fails; its own teardown comes on top.
  EXPECT_LT(r.seconds[0], kStartTimeout + 2 * kSlackSeconds) << r.AllOutput();
  EXPECT_NE(r.output[0].find("rank 3 never published"), std::string::npos) << r.AllOutput();
}

// ---- the real torchrun, whose agent already serves its own store on MASTER_PORT ----

TEST(RealTorchrun, StandaloneAllreduce) {
  if (!Have(HVDS_TORCHRUN)) GTEST_SKIP() << "no torchrun found";
  JobResult r;
  // torchrun --standalone picks a free MASTER_PORT and our store takes the next one, which
  // another process on this machine can hold by chance: then the job says so and one retry,
  // with a fresh port, is what a user would do.
  for (int attempt = 0; attempt < 2; attempt++) {
    r = RunLauncher({HVDS_TORCHRUN, "--standalone", "--nproc-per-node", "4", "--no-python",
                     HVDS_WORKER, "allreduce"},
                    {}, 120);
    if (r.AllOutput().find("Address already in use") == std::string::npos) break;
  }
  ASSERT_FALSE(r.timed_out) << r.AllOutput();
  EXPECT_TRUE(r.AllExitedZero()) << r.AllOutput();
  EXPECT_EQ(Count(r.AllOutput(), "PASS allreduce rank"), 4) << r.AllOutput();
}

}  // namespace
}  // namespace launch_test
