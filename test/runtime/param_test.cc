// Knobs: HVDSPARSE_ wins over HOROVOD_, defaults otherwise, reload sees a changed environment.
#include <gtest/gtest.h>

#include <cstdlib>

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
