// hwloc topology: parsing a synthetic two-socket machine (hwloc XML with GPUs on PCI), core and
// NUMA shares per local rank, the GPU each rank gets by locality, the check-build summary, and
// binding this process on the real machine.
#include "topology.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

namespace {

// Two packages, one NUMA node and four cores (one PU each) per package. On package 0's host
// bridge: two NVIDIA 3D controllers (cuda0, cuda1), the second one's audio function, and a BMC's
// VGA controller (not a GPU); on package 1's: one NVIDIA GPU (cuda2).
const char kTwoSockets[] = R"XML(<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x000000ff" complete_cpuset="0x000000ff" allowed_cpuset="0x000000ff" nodeset="0x00000003" complete_nodeset="0x00000003" allowed_nodeset="0x00000003" gp_index="1">
    <object type="Package" os_index="0" cpuset="0x0000000f" complete_cpuset="0x0000000f" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="50">
      <object type="NUMANode" os_index="0" cpuset="0x0000000f" complete_cpuset="0x0000000f" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="60" local_memory="68719476736">
        <page_type size="4096" count="16777216"/>
      </object>
        <object type="Core" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="10">
          <object type="PU" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="11"/>
        </object>
        <object type="Core" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="12">
          <object type="PU" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="13"/>
        </object>
        <object type="Core" os_index="2" cpuset="0x00000004" complete_cpuset="0x00000004" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="14">
          <object type="PU" os_index="2" cpuset="0x00000004" complete_cpuset="0x00000004" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="15"/>
        </object>
        <object type="Core" os_index="3" cpuset="0x00000008" complete_cpuset="0x00000008" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="16">
          <object type="PU" os_index="3" cpuset="0x00000008" complete_cpuset="0x00000008" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="17"/>
        </object>
        <object type="Bridge" gp_index="190" bridge_type="0-1" depth="0" bridge_pci="0000:[00-03]">
          <object type="PCIDev" gp_index="200" pci_busid="0000:01:00.0" pci_type="0302 [10de:2330] [10de:0000] a1" pci_link_speed="0.000000">
            <object type="OSDev" gp_index="201" name="cuda0" subtype="CUDA" osdev_type="5"/>
          </object>
          <object type="PCIDev" gp_index="202" pci_busid="0000:02:00.0" pci_type="0302 [10de:2330] [10de:0000] a1" pci_link_speed="0.000000">
            <object type="OSDev" gp_index="203" name="cuda1" subtype="CUDA" osdev_type="5"/>
          </object>
          <object type="PCIDev" gp_index="204" pci_busid="0000:02:00.1" pci_type="0403 [10de:22ba] [10de:0000] a1" pci_link_speed="0.000000"/>
          <object type="PCIDev" gp_index="205" pci_busid="0000:03:00.0" pci_type="0300 [1a03:2000] [1a03:0000] a1" pci_link_speed="0.000000">
            <object type="OSDev" gp_index="206" name="card0" subtype="" osdev_type="1"/>
          </object>
        </object>
    </object>
    <object type="Package" os_index="1" cpuset="0x000000f0" complete_cpuset="0x000000f0" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="51">
      <object type="NUMANode" os_index="1" cpuset="0x000000f0" complete_cpuset="0x000000f0" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="61" local_memory="68719476736">
        <page_type size="4096" count="16777216"/>
      </object>
        <object type="Core" os_index="4" cpuset="0x00000010" complete_cpuset="0x00000010" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="18">
          <object type="PU" os_index="4" cpuset="0x00000010" complete_cpuset="0x00000010" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="19"/>
        </object>
        <object type="Core" os_index="5" cpuset="0x00000020" complete_cpuset="0x00000020" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="20">
          <object type="PU" os_index="5" cpuset="0x00000020" complete_cpuset="0x00000020" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="21"/>
        </object>
        <object type="Core" os_index="6" cpuset="0x00000040" complete_cpuset="0x00000040" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="22">
          <object type="PU" os_index="6" cpuset="0x00000040" complete_cpuset="0x00000040" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="23"/>
        </object>
        <object type="Core" os_index="7" cpuset="0x00000080" complete_cpuset="0x00000080" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="24">
          <object type="PU" os_index="7" cpuset="0x00000080" complete_cpuset="0x00000080" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="25"/>
        </object>
        <object type="Bridge" gp_index="191" bridge_type="0-1" depth="0" bridge_pci="0000:[80-81]">
          <object type="PCIDev" gp_index="210" pci_busid="0000:81:00.0" pci_type="0302 [10de:2330] [10de:0000] a1" pci_link_speed="0.000000">
            <object type="OSDev" gp_index="211" name="cuda2" subtype="CUDA" osdev_type="5"/>
          </object>
        </object>
    </object>
  </object>
</topology>)XML";

class Topo : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!hvds__topo_available()) GTEST_SKIP() << "built without hwloc";
    char err[256] = "";
    ASSERT_EQ(hvds__topo_load(kTwoSockets, strlen(kTwoSockets), &t_, err, sizeof err), HVDS_SUCCESS)
        << err;
  }
  void TearDown() override { hvds__topo_free(t_); }
  std::string Cpus(const char* mode, int rank, int size) {
    char list[128] = "";
    EXPECT_EQ(hvds__topo_rank_cpus(t_, mode, rank, size, list, sizeof list), HVDS_SUCCESS);
    return list;
  }
  hvds_topo_t* t_ = nullptr;
};

TEST_F(Topo, CountsAndGpus) {
  hvds_topo_counts_t c;
  hvds__topo_counts(t_, &c);
  EXPECT_EQ(c.packages, 2);
  EXPECT_EQ(c.numa_nodes, 2);
  EXPECT_EQ(c.cores, 8);
  EXPECT_EQ(c.pus, 8);
  EXPECT_EQ(c.gpus, 3);  // not the audio function, not the BMC's VGA
  const char* bus[3] = {"0000:01:00.0", "0000:02:00.0", "0000:81:00.0"};
  const char* name[3] = {"cuda0", "cuda1", "cuda2"};
  const char* cpus[3] = {"0-3", "0-3", "4-7"};
  for (int i = 0; i < 3; i++) {
    hvds_topo_gpu_t g;
    ASSERT_EQ(hvds__topo_gpu(t_, i, &g), HVDS_SUCCESS);
    EXPECT_STREQ(g.bus_id, bus[i]);
    EXPECT_STREQ(g.name, name[i]);
    EXPECT_EQ(g.numa, i < 2 ? 0 : 1);
    EXPECT_STREQ(g.cpus, cpus[i]);
  }
  hvds_topo_gpu_t g;
  EXPECT_EQ(hvds__topo_gpu(t_, 3, &g), HVDS_INVALID_ARGUMENT);
  EXPECT_EQ(hvds__topo_gpu(t_, -1, &g), HVDS_INVALID_ARGUMENT);
}

// Contiguous equal shares of the cores, uneven when the counts do not divide, wrapping when
// there are more ranks than cores; NUMA mode gives whole nodes.
TEST_F(Topo, CoreAndNumaShares) {
  EXPECT_EQ(Cpus("core", 0, 4), "0-1");
  EXPECT_EQ(Cpus("core", 3, 4), "6-7");
  EXPECT_EQ(Cpus("core", 0, 3), "0-1");
  EXPECT_EQ(Cpus("core", 1, 3), "2-4");
  EXPECT_EQ(Cpus("core", 2, 3), "5-7");
  EXPECT_EQ(Cpus("core", 0, 1), "0-7");
  EXPECT_EQ(Cpus("core", 9, 16), "1");
  EXPECT_EQ(Cpus("numa", 0, 4), "0-3");
  EXPECT_EQ(Cpus("numa", 1, 4), "0-3");
  EXPECT_EQ(Cpus("numa", 2, 4), "4-7");
  EXPECT_EQ(Cpus("numa", 2, 3), "4-7");
  char list[64];
  EXPECT_EQ(hvds__topo_rank_cpus(t_, "socket", 0, 2, list, sizeof list), HVDS_INVALID_ARGUMENT);
  EXPECT_EQ(hvds__topo_rank_cpus(t_, "core", 2, 2, list, sizeof list), HVDS_INVALID_ARGUMENT);
}

std::vector<int> Gpus(hvds_topo_t* t, int size) {
  std::vector<int> g;
  for (int r = 0; r < size; r++) g.push_back(hvds__topo_gpu_for_rank(t, r, size));
  return g;
}

// Each rank takes the least used GPU nearest its cores: with two ranks, one per socket (not
// GPUs 0 and 1, both on socket 0); with four, the socket-0 ranks share out GPUs 0 and 1 and the
// socket-1 ranks share GPU 2; with more ranks than GPUs every GPU is used about equally.
TEST_F(Topo, GpuByLocality) {
  EXPECT_EQ(Gpus(t_, 1), std::vector<int>({0}));
  EXPECT_EQ(Gpus(t_, 2), std::vector<int>({0, 2}));
  EXPECT_EQ(Gpus(t_, 3), std::vector<int>({0, 1, 2}));
  EXPECT_EQ(Gpus(t_, 4), std::vector<int>({0, 1, 2, 2}));
  std::vector<int> eight = Gpus(t_, 8), used(3, 0);
  for (int g : eight) used[g]++;
  for (int u : used) {
    EXPECT_GE(u, 2);
    EXPECT_LE(u, 3);
  }
  EXPECT_EQ(hvds__topo_gpu_for_rank(t_, 4, 4), -1);
}

TEST_F(Topo, SummaryForCheckBuild) {
  char* text = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&text, &len);
  hvds__topo_print(t_, 4, f);
  fclose(f);
  std::string s(text, len);
  free(text);
  EXPECT_NE(s.find("2 package(s), 2 NUMA node(s), 8 core(s), 8 PU(s), 3 GPU(s)"), std::string::npos)
      << s;
  EXPECT_NE(s.find("NUMA node 1: CPUs 4-7, 65536 MiB"), std::string::npos) << s;
  EXPECT_NE(s.find("GPU 2: 0000:81:00.0 (cuda2), NUMA node 1, near CPUs 4-7"), std::string::npos)
      << s;
  EXPECT_NE(s.find("local rank 3: --bind-to core CPUs 6-7, --bind-to numa CPUs 4-7, GPU 2"),
            std::string::npos)
      << s;
}

TEST(TopoLoad, BadXmlIsAnError) {
  if (!hvds__topo_available()) GTEST_SKIP() << "built without hwloc";
  const char bad[] = "<topology version=\"2.0\"><object type=";
  hvds_topo_t* t = reinterpret_cast<hvds_topo_t*>(1);
  char err[256] = "";
  EXPECT_NE(hvds__topo_load(bad, strlen(bad), &t, err, sizeof err), HVDS_SUCCESS);
  EXPECT_EQ(t, nullptr);
  EXPECT_NE(err[0], '\0');
  hvds__topo_free(nullptr);
}

// This machine's topology is discovered once per process and every load is a copy of its own
// (hwloc's PCI discovery leaves memory behind in libpciaccess at each run; the init/shutdown soak
// measures that): the copies agree, outlive each other, and an XML load is still the XML's.
TEST(TopoLoad, ThisMachineIsDiscoveredOnceAndEachLoadIsACopy) {
  if (!hvds__topo_available()) GTEST_SKIP() << "built without hwloc";
  char err[256] = "";
  hvds_topo_t *a = nullptr, *b = nullptr, *x = nullptr;
  ASSERT_EQ(hvds__topo_load(nullptr, 0, &a, err, sizeof err), HVDS_SUCCESS) << err;
  ASSERT_EQ(hvds__topo_load(nullptr, 0, &b, err, sizeof err), HVDS_SUCCESS) << err;
  ASSERT_NE(a, b);
  hvds_topo_counts_t ca, cb;
  hvds__topo_counts(a, &ca);
  hvds__topo_free(a);
  hvds__topo_counts(b, &cb);  // b is its own copy: still whole after a is gone
  EXPECT_GT(ca.pus, 0);
  EXPECT_EQ(ca.packages, cb.packages);
  EXPECT_EQ(ca.cores, cb.cores);
  EXPECT_EQ(ca.pus, cb.pus);
  EXPECT_EQ(ca.gpus, cb.gpus);
  ASSERT_EQ(hvds__topo_load(kTwoSockets, strlen(kTwoSockets), &x, err, sizeof err), HVDS_SUCCESS)
      << err;
  hvds_topo_counts_t cx;
  hvds__topo_counts(x, &cx);
  EXPECT_EQ(cx.packages, 2);
  EXPECT_EQ(cx.gpus, 3);
  hvds__topo_free(x);
  hvds__topo_free(b);
}

// On this machine: binding to a core share narrows the affinity; none leaves it; an unknown
// mode is refused. The original affinity is restored afterwards.
TEST(TopoBind, ThisMachine) {
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof before, &before), 0);
  char err[256] = "";
  EXPECT_EQ(hvds__topo_bind_self("none", 0, 2, err, sizeof err), HVDS_SUCCESS);
  EXPECT_EQ(hvds__topo_bind_self(nullptr, 0, 2, err, sizeof err), HVDS_SUCCESS);
  EXPECT_EQ(hvds__topo_bind_self("socket", 0, 2, err, sizeof err), HVDS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err).find("socket"), std::string::npos) << err;
  if (!hvds__topo_available()) GTEST_SKIP() << "built without hwloc";
  hvds_topo_t* t = nullptr;
  ASSERT_EQ(hvds__topo_load(nullptr, 0, &t, err, sizeof err), HVDS_SUCCESS) << err;
  hvds_topo_counts_t c;
  hvds__topo_counts(t, &c);
  char want[128] = "";
  ASSERT_EQ(hvds__topo_rank_cpus(t, "core", c.cores - 1, c.cores, want, sizeof want), HVDS_SUCCESS);
  hvds__topo_free(t);
  ASSERT_EQ(hvds__topo_bind_self("core", c.cores - 1, c.cores, err, sizeof err), HVDS_SUCCESS)
      << err;
  cpu_set_t after;
  ASSERT_EQ(sched_getaffinity(0, sizeof after, &after), 0);
  EXPECT_LT(CPU_COUNT(&after), CPU_COUNT(&before) + (c.cores == 1));
  std::string got;
  for (int i = 0; i < CPU_SETSIZE; i++)
    if (CPU_ISSET(i, &after)) got += (got.empty() ? "" : ",") + std::to_string(i);
  EXPECT_EQ(got, want);  // one core of one PU here; a list of one
  ASSERT_EQ(sched_setaffinity(0, sizeof before, &before), 0);
}

// "auto" in a child process each (the binding and the module's memory of it stay there): it
// binds like "core" when every local rank gets a core and the process is unbound; it leaves the
// process alone when the ranks outnumber the cores or someone else bound it already.
int CpusAfterAutoBind(int local_rank, int local_size, int pre_bind_cpu) {
  pid_t pid = fork();
  if (pid == 0) {
    if (pre_bind_cpu >= 0) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(pre_bind_cpu, &one);
      if (sched_setaffinity(0, sizeof one, &one) != 0) _exit(200);
    }
    char err[256] = "";
    if (hvds__topo_bind_self("auto", local_rank, local_size, err, sizeof err) != HVDS_SUCCESS)
      _exit(201);
    cpu_set_t now;
    if (sched_getaffinity(0, sizeof now, &now) != 0) _exit(202);
    int first = -1;
    for (int i = 0; i < CPU_SETSIZE && first < 0; i++)
      if (CPU_ISSET(i, &now)) first = i;
    _exit(CPU_COUNT(&now) * 16 + first);  // count and first CPU, both small here
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(TopoBind, AutoBindsOnlyWhereTheRanksSpreadEvenlyAndNothingElseBound) {
  char err[256] = "";
  if (!hvds__topo_available()) {  // nothing to know the cores by: auto leaves the process alone
    cpu_set_t mine;
    ASSERT_EQ(sched_getaffinity(0, sizeof mine, &mine), 0);
    EXPECT_EQ(CpusAfterAutoBind(0, 2, -1) / 16, CPU_COUNT(&mine));
    return;
  }
  hvds_topo_t* t = nullptr;
  ASSERT_EQ(hvds__topo_load(nullptr, 0, &t, err, sizeof err), HVDS_SUCCESS) << err;
  hvds_topo_counts_t c;
  hvds__topo_counts(t, &c);
  char want[128] = "";
  int last = c.cores - 1;
  ASSERT_EQ(hvds__topo_rank_cpus(t, "core", last, c.cores, want, sizeof want), HVDS_SUCCESS);
  hvds__topo_free(t);
  cpu_set_t mine;
  ASSERT_EQ(sched_getaffinity(0, sizeof mine, &mine), 0);
  int all = CPU_COUNT(&mine);
  ASSERT_LT(all, 16) << "the exit-code encoding assumes a small machine";
  // More local ranks than cores, not the same number on every core: left alone.
  if (c.cores >= 2) {
    EXPECT_EQ(CpusAfterAutoBind(0, c.cores + 1, -1) / 16, all);
  }
  // One rank: nothing to separate.
  EXPECT_EQ(CpusAfterAutoBind(0, 1, -1) / 16, all);
  if (c.cores >= 2 && c.cores == c.pus) {
    // One core each: the last rank gets the last core, as "core" gives it.
    int got = CpusAfterAutoBind(last, c.cores, -1);
    EXPECT_EQ(got / 16, 1);
    EXPECT_EQ(std::to_string(got % 16), std::string(want));
    // Bound by someone else (mpirun, taskset): kept as it is.
    got = CpusAfterAutoBind(last, c.cores, 0);
    EXPECT_EQ(got, 16 + 0);
    // Twice as many ranks as cores: two on each core, rank r on core r % cores, as "core" does.
    for (int r : {last, c.cores + 1}) {
      got = CpusAfterAutoBind(r, 2 * c.cores, -1);
      EXPECT_EQ(got / 16, 1) << "rank " << r;
      EXPECT_EQ(got % 16, r % c.cores) << "rank " << r;
    }
  }
}

}  // namespace
