// Knobs: HVDSPARSE_ wins over HOROVOD_, defaults otherwise, reload sees a changed environment.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "param.h"

TEST(Param, PrefixOrderDefaultsAndReload) {
  unsetenv("HVDSPARSE_FUSION_THRESHOLD");
  unsetenv("HOROVOD_FUSION_THRESHOLD");
  setenv("HOROVOD_CYCLE_TIME", "2.5", 1);
  setenv("HVDSPARSE_CACHE_CAPACITY", "7", 1);
  setenv("HOROVOD_CACHE_CAPACITY", "9", 1);
  hvds__param_reload();
  EXPECT_EQ(hvds__param_int(HVDS_PARAM_FUSION_THRESHOLD), 134217728);
  EXPECT_FALSE(hvds__param_is_set(HVDS_PARAM_FUSION_THRESHOLD));
  EXPECT_DOUBLE_EQ(hvds__param_dbl(HVDS_PARAM_CYCLE_TIME), 2.5);
  EXPECT_EQ(hvds__param_int(HVDS_PARAM_CACHE_CAPACITY), 7);
  EXPECT_TRUE(hvds__param_is_set(HVDS_PARAM_CACHE_CAPACITY));
  EXPECT_EQ(hvds__param_str(HVDS_PARAM_RENDEZVOUS_ADDR), nullptr);
  EXPECT_STREQ(hvds__param_str(HVDS_PARAM_HOSTNAME), "localhost");
  setenv("HVDSPARSE_FUSION_THRESHOLD", "0", 1);
  hvds__param_reload();
  EXPECT_EQ(hvds__param_int(HVDS_PARAM_FUSION_THRESHOLD), 0);
  EXPECT_STREQ(hvds__param_name(HVDS_PARAM_FUSION_THRESHOLD), "FUSION_THRESHOLD");
}

// Horovod knobs hvdsparse ignores are reported by name, unless set to what it already does.
TEST(Param, IgnoredHorovodKnobsAreReported) {
  static std::string seen;
  seen.clear();
  unsetenv("HOROVOD_HIERARCHICAL_ALLGATHER");
  setenv("HOROVOD_TORUS_ALLREDUCE", "1", 1);
  setenv("HOROVOD_THREAD_AFFINITY", "0,1", 1);
  setenv("HOROVOD_CONTROLLER", "GLOO", 1);  // what hvdsparse does: no warning
  setenv("HOROVOD_CPU_OPERATIONS", "mpi", 1);
  int n = hvds__param_report_ignored([](const char* name, const char* value, const char* why) {
    EXPECT_NE(std::string(why), "");
    seen += std::string(name) + "=" + value + ";";
  });
  EXPECT_EQ(n, 3);
  EXPECT_EQ(seen, "HOROVOD_TORUS_ALLREDUCE=1;HOROVOD_THREAD_AFFINITY=0,1;HOROVOD_CPU_OPERATIONS=mpi;");
  EXPECT_EQ(hvds__param_report_ignored(nullptr), 3);
  unsetenv("HOROVOD_TORUS_ALLREDUCE");
  unsetenv("HOROVOD_THREAD_AFFINITY");
  unsetenv("HOROVOD_CONTROLLER");
  unsetenv("HOROVOD_CPU_OPERATIONS");
  EXPECT_EQ(hvds__param_report_ignored(nullptr), 0);
}
