// String map: insert, replace, remove with tombstones, growth.
#include <gtest/gtest.h>

#include <string>

#include "name_map.h"

TEST(NameMap, PutGetRemoveAndGrow) {
  hvds_name_map_t m = {};
  for (intptr_t i = 1; i <= 5000; i++)
    ASSERT_EQ(hvds__name_map_put(&m, ("k" + std::to_string(i)).c_str(), (void*)i), 0);
  EXPECT_EQ(m.count, 5000u);
  for (intptr_t i = 1; i <= 5000; i += 2)
    EXPECT_EQ(hvds__name_map_remove(&m, ("k" + std::to_string(i)).c_str()), (void*)i);
  for (intptr_t i = 1; i <= 5000; i++)
    EXPECT_EQ(hvds__name_map_get(&m, ("k" + std::to_string(i)).c_str()), i % 2 ? nullptr : (void*)i);
  // Churn: tombstones are reclaimed, the table does not grow without bound.
  for (int round = 0; round < 100000; round++) {
    std::string k = "churn" + std::to_string(round);
    ASSERT_EQ(hvds__name_map_put(&m, k.c_str(), (void*)1), 0);
    hvds__name_map_remove(&m, k.c_str());
  }
  EXPECT_LE(m.cap, 16384u);
  ASSERT_EQ(hvds__name_map_put(&m, "k2", (void*)7), 0);
  EXPECT_EQ(hvds__name_map_get(&m, "k2"), (void*)7);
  hvds__name_map_clear(&m);
}

// A training step's names come back every step: a removed key is revived in its old slot,
// and the map neither grows nor loses keys over many steps.
TEST(NameMap, StepNamesComeBackWithoutGrowth) {
  hvds_name_map_t m = {};
  for (int step = 0; step < 200; step++) {
    for (intptr_t i = 1; i <= 1000; i++)
      ASSERT_EQ(hvds__name_map_put(&m, ("grad." + std::to_string(i)).c_str(), (void*)i), 0);
    ASSERT_EQ(m.count, 1000u);
    for (intptr_t i = 1; i <= 1000; i++)
      ASSERT_EQ(hvds__name_map_remove(&m, ("grad." + std::to_string(i)).c_str()), (void*)i);
    ASSERT_EQ(m.count, 0u);
  }
  EXPECT_LE(m.cap, 2048u);
  EXPECT_EQ(m.used, 1000u);  // every slot in use is a step name, live or waiting to come back
  hvds__name_map_clear(&m);
}

TEST(NameMap, RemoveIfOnlyRemovesTheGivenValue) {
  hvds_name_map_t m = {};
  int a = 0, b = 0;
  ASSERT_EQ(hvds__name_map_put(&m, "t", &a), 0);
  EXPECT_EQ(hvds__name_map_remove_if(&m, "t", &b), 0);
  EXPECT_EQ(hvds__name_map_get(&m, "t"), &a);
  EXPECT_EQ(hvds__name_map_remove_if(&m, "t", &a), 1);
  EXPECT_EQ(hvds__name_map_get(&m, "t"), nullptr);
  EXPECT_EQ(hvds__name_map_remove_if(&m, "missing", &a), 0);
  EXPECT_EQ(m.count, 0u);
  hvds__name_map_clear(&m);
}
