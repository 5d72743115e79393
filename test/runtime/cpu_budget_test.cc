// The CPU budget: the affinity mask capped by the cgroup's CPU quota, found through
// /proc/self/cgroup and /proc/self/mountinfo texts over a cgroup tree written in a temporary
// directory (v2 cpu.max, v1 cpu.cfs_quota_us / cpu.cfs_period_us, limits of ancestors).
#include "cpu_budget.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <string>

namespace {

class CpuBudget : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/hvds_cpu_budget_XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    root_ = dir;
  }
  void TearDown() override {
    std::string cmd = "rm -rf '" + root_ + "'";
    ASSERT_EQ(system(cmd.c_str()), 0);
  }
  // Writes text at path (below the root), creating its directories.
  void Write(const std::string& path, const std::string& text) {
    std::string full = root_;
    for (size_t at = 1; (at = path.find('/', at)) != std::string::npos; at++)
      mkdir((root_ + path.substr(0, at)).c_str(), 0755);
    full += path;
    std::ofstream(full) << text;
  }
  // A v1 cgroup directory's quota (microseconds per 100 ms period; -1: none).
  void WriteV1(const std::string& dir, const std::string& quota_us) {
    Write(dir + "/cpu.cfs_quota_us", quota_us + "\n");
    Write(dir + "/cpu.cfs_period_us", "100000\n");
  }
  hvds_cpu_budget_t Budget(int cpus, const std::string& cgroup, const std::string& mountinfo) {
    return hvds__cpu_budget_from(cpus, cgroup.c_str(), mountinfo.c_str(), root_.c_str());
  }
  std::string root_;
};

const char kV2Mount[] =
    "30 25 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 "
    "rw,nsdelegate\n";

TEST_F(CpuBudget, V2ContainerQuotaCapsTheMaskRoundedUp) {
  struct {
    const char* cpu_max;
    int cpus;
    double quota;
    int cores;
  } cases[] = {
      {"150000 100000", 8, 1.5, 2},  // 1.5 CPUs keep 2 cores busy part of the time
      {"max 100000", 8, 0, 8},       // no limit
      {"800000 100000", 2, 8.0, 2},  // a quota above the mask leaves the mask
  };
  for (const auto& c : cases) {
    Write("/sys/fs/cgroup/cpu.max", std::string(c.cpu_max) + "\n");
    hvds_cpu_budget_t b = Budget(c.cpus, "0::/\n", kV2Mount);
    EXPECT_DOUBLE_EQ(b.quota, c.quota) << c.cpu_max;
    EXPECT_EQ(b.cpus, c.cpus);
    EXPECT_EQ(b.cores, c.cores) << c.cpu_max;
  }
}

TEST_F(CpuBudget, V2ParentLimitBindsTheChild) {
  Write("/sys/fs/cgroup/kubepods/pod1/cpu.max", "400000 100000\n");
  Write("/sys/fs/cgroup/kubepods/pod1/ctr/cpu.max", "max 100000\n");
  Write("/sys/fs/cgroup/kubepods/cpu.max", "max 100000\n");
  hvds_cpu_budget_t b = Budget(64, "0::/kubepods/pod1/ctr\n", kV2Mount);
  EXPECT_DOUBLE_EQ(b.quota, 4.0);
  EXPECT_EQ(b.cores, 4);
  // The smaller of two limits on the way up wins.
  Write("/sys/fs/cgroup/kubepods/pod1/ctr/cpu.max", "250000 100000\n");
  EXPECT_EQ(Budget(64, "0::/kubepods/pod1/ctr\n", kV2Mount).cores, 3);
}

TEST_F(CpuBudget, V1ContainerSeesItsCgroupAsTheMountRoot) {
  // Hybrid layout: cpu and cpuacct mounted together; the container's mount shows its own
  // cgroup (/docker/abc) as the root, so its quota files sit at the mount point.
  const std::string mounts =
      "41 33 0:37 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro,nosuid - cgroup cgroup "
      "rw,cpu,cpuacct\n"
      "42 33 0:38 /docker/abc /sys/fs/cgroup/memory ro,nosuid - cgroup cgroup rw,memory\n";
  WriteV1("/sys/fs/cgroup/cpu,cpuacct", "50000");
  hvds_cpu_budget_t b =
      Budget(16, "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n", mounts);
  EXPECT_DOUBLE_EQ(b.quota, 0.5);
  EXPECT_EQ(b.cores, 1);
}

TEST_F(CpuBudget, V1UnlimitedAndCpuacctAloneAreNoLimit) {
  const std::string mounts =
      "41 33 0:37 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"
      "43 33 0:39 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct\n";
  WriteV1("/sys/fs/cgroup/cpu", "-1");
  WriteV1("/sys/fs/cgroup/cpuacct", "10000");  // not the cpu controller
  hvds_cpu_budget_t b = Budget(4, "3:cpuacct:/\n2:cpu:/\n", mounts);
  EXPECT_EQ(b.quota, 0);
  EXPECT_EQ(b.cores, 4);
}

TEST_F(CpuBudget, V1AndV2TogetherTakeTheSmaller) {
  const std::string mounts =
      std::string("41 33 0:37 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n") +
      "30 25 0:26 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
  WriteV1("/sys/fs/cgroup/cpu/job", "300000");
  Write("/sys/fs/cgroup/unified/job/cpu.max", "200000 100000\n");
  hvds_cpu_budget_t b = Budget(32, "2:cpu:/job\n0::/job\n", mounts);
  EXPECT_DOUBLE_EQ(b.quota, 2.0);
  EXPECT_EQ(b.cores, 2);
}

TEST_F(CpuBudget, UnreadableOrMalformedMeansNoLimit) {
  EXPECT_EQ(Budget(6, "", "").cores, 6);
  EXPECT_EQ(hvds__cpu_budget_from(6, nullptr, nullptr, root_.c_str()).cores, 6);
  EXPECT_EQ(Budget(6, "garbage\n::\n", "not a mountinfo line\n - \n").cores, 6);
  // A v2 mount whose cpu.max is missing or unparsable.
  EXPECT_EQ(Budget(6, "0::/none\n", kV2Mount).cores, 6);
  Write("/sys/fs/cgroup/cpu.max", "nonsense\n");
  EXPECT_EQ(Budget(6, "0::/\n", kV2Mount).cores, 6);
  // No CPU count at all still leaves one core.
  EXPECT_EQ(Budget(0, "", "").cores, 1);
}

TEST(CpuBudgetOfThisProcess, WithinTheAffinityMask) {
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  hvds_cpu_budget_t b = hvds__cpu_budget();
  EXPECT_EQ(b.cpus, CPU_COUNT(&set));
  EXPECT_GE(b.cores, 1);
  EXPECT_LE(b.cores, b.cpus);
  if (b.quota > 0) {
    EXPECT_GE(b.cores + 1e-9, b.quota < b.cpus ? b.quota : b.cpus);
  }
}

}  // namespace
