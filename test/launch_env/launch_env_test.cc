// Engine detection: precedence, each engine's identity and store address, Slurm node lists,
// derived ports, and the HVDSPARSE_* knobs that override an engine's choice.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>

#include "launch_env.h"
#include "param.h"
#include "slurm_nodelist.h"

namespace {

using Vars = std::map<std::string, std::string>;

const char* Lookup(void* ctx, const char* name) {
  auto* vars = static_cast<Vars*>(ctx);
  auto it = vars->find(name);
  return it == vars->end() ? nullptr : it->second.c_str();
}

hvds_launch_env_t Parse(Vars vars) {
  hvds_launch_env_t env;
  hvds__launch_env_parse(Lookup, &vars, &env);
  return env;
}

std::string Host(const char* list, int index) {
  char out[64];
  return hvds__slurm_nodelist_host(list, index, out, sizeof(out)) == 0 ? out : "<none>";
}

const Vars kTorch = {{"RANK", "2"},
                     {"WORLD_SIZE", "8"},
                     {"LOCAL_RANK", "0"},
                     {"LOCAL_WORLD_SIZE", "2"},
                     {"MASTER_ADDR", "10.1.2.3"},
                     {"MASTER_PORT", "29500"}};
const Vars kOmpi = {{"OMPI_COMM_WORLD_RANK", "1"},
                    {"OMPI_COMM_WORLD_SIZE", "4"},
                    {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                    {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                    {"OMPI_MCA_ess_base_jobid", "1263009793"}};
const Vars kSlurm = {{"SLURM_PROCID", "5"},    {"SLURM_NTASKS", "8"},
                     {"SLURM_LOCALID", "1"},   {"SLURM_NODELIST", "node[01-04,07]"},
                     {"SLURM_JOB_ID", "4242"}, {"SLURM_STEP_ID", "3"}};

Vars Merge(std::initializer_list<Vars> parts) {
  Vars all;
  for (const Vars& p : parts) all.insert(p.begin(), p.end());
  return all;
}

TEST(Nodelist, RangesListsPaddingAndProducts) {
  EXPECT_EQ(Host("localhost", 0), "localhost");
  EXPECT_EQ(Host("localhost", 1), "<none>");
  EXPECT_EQ(Host("node[01-04,07]", 0), "node01");
  EXPECT_EQ(Host("node[01-04,07]", 3), "node04");
  EXPECT_EQ(Host("node[01-04,07]", 4), "node07");
  EXPECT_EQ(Host("node[01-04,07]", 5), "<none>");
  EXPECT_EQ(Host("a,b[1-2],c", 2), "b2");
  EXPECT_EQ(Host("a,b[1-2],c", 3), "c");
  EXPECT_EQ(Host("n[8-10]", 2), "n10");
  EXPECT_EQ(Host("n[008-010]x", 1), "n009x");
  EXPECT_EQ(Host("rack[1-2]-n[01-02]", 1), "rack1-n02");
  EXPECT_EQ(Host("rack[1-2]-n[01-02]", 2), "rack2-n01");
}

TEST(Nodelist, MalformedListsGiveNoHost) {
  for (const char* bad :
       {"", "node[01-", "node[]", "node[3-1]", "node[a-b]", "n[1-2]]", ",a", "n[[1]]"})
    EXPECT_EQ(Host(bad, 0), "<none>") << bad;
  char small[4];
  EXPECT_EQ(hvds__slurm_nodelist_host("node01", 0, small, sizeof(small)), -1);
  EXPECT_STREQ(small, "");
}

TEST(Detect, NothingMeansOneProcess) { EXPECT_EQ(Parse({}).engine, HVDS_ENGINE_NONE); }

TEST(Detect, PrecedenceLauncherTorchrunMpirunSlurm) {
  EXPECT_EQ(Parse(Merge({kTorch, kOmpi, kSlurm, {{"HVDSPARSE_RANK", "0"}}})).engine,
            HVDS_ENGINE_HVDSPARSE);
  EXPECT_EQ(Parse(Merge({kOmpi, {{"HOROVOD_RANK", "0"}}})).engine, HVDS_ENGINE_HVDSPARSE);
  EXPECT_EQ(Parse(Merge({kTorch, kOmpi, kSlurm})).engine, HVDS_ENGINE_TORCHRUN);
  EXPECT_EQ(Parse(Merge({kOmpi, kSlurm})).engine, HVDS_ENGINE_MPIRUN);
  EXPECT_EQ(Parse(kSlurm).engine, HVDS_ENGINE_SRUN);
  // Empty values count as unset, as for our own knobs.
  EXPECT_EQ(Parse(Merge({{{"HVDSPARSE_RANK", ""}}, kSlurm})).engine, HVDS_ENGINE_SRUN);
}

TEST(Detect, TorchrunStyle) {
  hvds_launch_env_t e = Parse(kTorch);
  EXPECT_EQ(e.rank, 2);
  EXPECT_EQ(e.size, 8);
  EXPECT_EQ(e.local_rank, 0);
  EXPECT_EQ(e.local_size, 2);
  EXPECT_STREQ(e.store_addr, "10.1.2.3");
  EXPECT_STREQ(e.bind_addr, "");  // every interface: the others come from other hosts
  EXPECT_EQ(e.store_port, 29500);
  EXPECT_STREQ(e.job_id, "torch-job");

  Vars loopback = kTorch;
  loopback["MASTER_ADDR"] = "localhost";
  loopback.erase("LOCAL_WORLD_SIZE");
  e = Parse(loopback);
  EXPECT_STREQ(e.bind_addr, "127.0.0.1");
  EXPECT_EQ(e.local_size, HVDS_LAUNCH_UNKNOWN);
}

TEST(Detect, TorchrunAgentStoreTakesMasterPortSoOursTakesTheNext) {
  Vars v = kTorch;
  v["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  v["TORCHELASTIC_RUN_ID"] = "abc";
  hvds_launch_env_t e = Parse(v);
  EXPECT_EQ(e.store_port, 29501);
  EXPECT_STREQ(e.job_id, "torch-abc");
}

TEST(Detect, TorchrunStyleWithoutMasterNamesTheProblem) {
  Vars v = kTorch;
  v.erase("MASTER_PORT");
  hvds_launch_env_t e = Parse(v);
  EXPECT_EQ(e.engine, HVDS_ENGINE_TORCHRUN);
  EXPECT_STREQ(e.store_addr, "");
  EXPECT_NE(std::string(e.problem).find("MASTER_PORT"), std::string::npos);
}

TEST(Detect, MpirunOneHostUsesLoopbackAndAPortFromTheJobId) {
  hvds_launch_env_t e = Parse(kOmpi);
  EXPECT_EQ(e.engine, HVDS_ENGINE_MPIRUN);
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.size, 4);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_size, 4);
  EXPECT_STREQ(e.job_id, "ompi-1263009793");
  EXPECT_STREQ(e.store_addr, "127.0.0.1");
  EXPECT_STREQ(e.bind_addr, "127.0.0.1");
  EXPECT_EQ(e.store_port, hvds__launch_port_for("ompi-1263009793"));

  Vars pmix = kOmpi;  // Open MPI 5 names the job only through PMIx
  pmix.erase("OMPI_MCA_ess_base_jobid");
  pmix["PMIX_NAMESPACE"] = "prterun-vm-1234@1";
  EXPECT_STREQ(Parse(pmix).job_id, "ompi-prterun-vm-1234@1");
}

TEST(Detect, MpirunAcrossHostsAsksForRankZerosHost) {
  Vars v = kOmpi;
  v["OMPI_COMM_WORLD_LOCAL_SIZE"] = "2";
  hvds_launch_env_t e = Parse(v);
  EXPECT_STREQ(e.store_addr, "");
  EXPECT_GT(e.store_port, 0);
  EXPECT_NE(std::string(e.problem).find("HVDSPARSE_GLOO_RENDEZVOUS_ADDR"), std::string::npos);
}

TEST(Detect, SrunFirstNodeAndPortFromJobAndStep) {
  hvds_launch_env_t e = Parse(kSlurm);
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_size, HVDS_LAUNCH_UNKNOWN);
  EXPECT_STREQ(e.store_addr, "node01");
  EXPECT_STREQ(e.bind_addr, "");
  EXPECT_STREQ(e.job_id, "slurm-4242.3");
  EXPECT_EQ(e.store_port, hvds__launch_port_for("slurm-4242.3"));

  // The step's own node list and task count win over the allocation's.
  Vars step = kSlurm;
  step["SLURM_STEP_NODELIST"] = "gpu[7-8]";
  step["SLURM_STEP_NUM_TASKS"] = "6";
  step["SLURMD_NODENAME"] = "gpu8";
  e = Parse(step);
  EXPECT_STREQ(e.store_addr, "gpu7");
  EXPECT_EQ(e.size, 6);
  EXPECT_STREQ(e.host, "gpu8");
}

TEST(Detect, SlurmBatchScriptWithoutStepIsNotAJob) {
  Vars batch = kSlurm;
  batch.erase("SLURM_STEP_ID");
  EXPECT_EQ(Parse(batch).engine, HVDS_ENGINE_NONE);
}

TEST(Port, DerivedPortIsStableAndInRange) {
  int a = hvds__launch_port_for("slurm-1.0");
  EXPECT_EQ(a, hvds__launch_port_for("slurm-1.0"));
  EXPECT_NE(a, hvds__launch_port_for("slurm-1.1"));
  for (const char* key : {"", "x", "ompi-1263009793", "slurm-4242.3"}) {
    EXPECT_GE(hvds__launch_port_for(key), 20000);
    EXPECT_LT(hvds__launch_port_for(key), 32000);
  }
}

// The process's own environment: the knobs override where rank 0 serves and the host name.
TEST(Read, KnobsOverrideTheEngine) {
  for (const auto& kv : kOmpi) setenv(kv.first.c_str(), kv.second.c_str(), 1);
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
  setenv("HVDSPARSE_GLOO_RENDEZVOUS_ADDR", "10.9.8.7", 1);
  setenv("HVDSPARSE_GLOO_RENDEZVOUS_PORT", "23456", 1);
  setenv("HVDSPARSE_HOSTNAME", "fakehost", 1);
  hvds__param_reload();
  hvds_launch_env_t e;
  hvds__launch_env_read(&e);
  EXPECT_EQ(e.engine, HVDS_ENGINE_MPIRUN);
  EXPECT_STREQ(e.store_addr, "10.9.8.7");
  EXPECT_EQ(e.store_port, 23456);
  EXPECT_STREQ(e.host, "fakehost");
  EXPECT_STREQ(e.problem, "");

  unsetenv("HVDSPARSE_HOSTNAME");
  unsetenv("HVDSPARSE_GLOO_RENDEZVOUS_PORT");
  hvds__param_reload();
  hvds__launch_env_read(&e);
  EXPECT_EQ(e.store_port, hvds__launch_port_for("ompi-1263009793"));
  EXPECT_STRNE(e.host, "");  // gethostname()
}

}  // namespace
