// String map: insert, replace, remove with tombstones, growth.
#include <gtest/gtest.h>

#include <string>

extern "C" {
#include "name_map.h"
}

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
