// The tcp transport's poll time: the knob when set, else 50 us only while every rank sharing this
// machine's cores has one.
#include "tcp_polling.h"

#include <gtest/gtest.h>

TEST(TcpPolling, KnobWins) {
  EXPECT_EQ(hvds__tcp_poll_us(0, 1, 1, 64), 0);
  EXPECT_EQ(hvds__tcp_poll_us(200, 8, 8, 2), 200);
}

TEST(TcpPolling, PollsOnlyWithACorePerRankOfTheMachine) {
  EXPECT_EQ(hvds__tcp_poll_us(-1, 1, 1, 2), 50);
  EXPECT_EQ(hvds__tcp_poll_us(-1, 2, 2, 2), 50);
  EXPECT_EQ(hvds__tcp_poll_us(-1, 3, 3, 2), 0);
  // One rank per host name, but four hosts on one 2-core machine (namespaces, containers).
  EXPECT_EQ(hvds__tcp_poll_us(-1, 1, 4, 2), 0);
  // The machine's boot id unknown (0): this host's ranks alone decide.
  EXPECT_EQ(hvds__tcp_poll_us(-1, 2, 0, 2), 50);
  EXPECT_EQ(hvds__tcp_poll_us(-1, 4, 0, 2), 0);
}
