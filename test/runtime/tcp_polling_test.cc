// The tcp transport's poll time: the knob when set, else 50 us only while every rank has a core:
// this host's ranks within the cores this process may use, the machine's within its cores.
#include "tcp_polling.h"

#include <gtest/gtest.h>

TEST(TcpPolling, KnobWins) {
  EXPECT_EQ(hvds__tcp_poll_us(0, 1, 1, 64, 64), 0);
  EXPECT_EQ(hvds__tcp_poll_us(200, 8, 8, 2, 2), 200);
}

TEST(TcpPolling, PollsOnlyWithACorePerRankOfTheMachine) {
  EXPECT_EQ(hvds__tcp_poll_us(-1, 1, 1, 2, 2), 50);
  EXPECT_EQ(hvds__tcp_poll_us(-1, 2, 2, 2, 2), 50);
  EXPECT_EQ(hvds__tcp_poll_us(-1, 3, 3, 2, 2), 0);
  // One rank per host name, but four hosts on one 2-core machine (namespaces, containers).
  EXPECT_EQ(hvds__tcp_poll_us(-1, 1, 4, 2, 2), 0);
  // The machine's boot id unknown (0): this host's ranks alone decide.
  EXPECT_EQ(hvds__tcp_poll_us(-1, 2, 0, 2, 2), 50);
  EXPECT_EQ(hvds__tcp_poll_us(-1, 4, 0, 2, 2), 0);
}

TEST(TcpPolling, AContainersQuotaBoundsItsHostsRanks) {
  // A 64-core machine, this container limited to 2 CPUs: 4 ranks in it must not poll.
  EXPECT_EQ(hvds__tcp_poll_us(-1, 4, 4, 2, 64), 0);
  EXPECT_EQ(hvds__tcp_poll_us(-1, 2, 8, 2, 64), 50);
  // Four such containers on one machine, a rank each, with cores to spare: they poll.
  EXPECT_EQ(hvds__tcp_poll_us(-1, 1, 4, 2, 16), 50);
  // More ranks on the machine than it has cores: none polls, whatever the quotas say.
  EXPECT_EQ(hvds__tcp_poll_us(-1, 1, 20, 2, 16), 0);
}
