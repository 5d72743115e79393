// Tests of the TCP transport: N ranks as threads in one process, each with its own full mesh of
// real loopback TCP connections, rendezvousing through an in-memory key-value store. The
// contract every transport keeps is ../common/p2p_contract.h; here what is TCP's own.
#include "tcp_p2p.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "../common/p2p_contract.h"
#include "tcp_test_util.h"

namespace hvds_test {
// What this transport's failures say (p2p_contract.h).
const FailureTexts& TransportFailures(CreateFn) {
  static const FailureTexts kTcp = {"rank 0 (127.0.0.1:", "connection closed", "the peer closed it",
                                    1000.0};
  return kTcp;
}
}  // namespace hvds_test

namespace {

using namespace tcp_test;
using hvds_test::P2pContract;
using hvds_test::P2pContractRanks;
using hvds_test::P2pOwnEngine;

INSTANTIATE_TEST_SUITE_P(Tcp, P2pContract, ::testing::Values(hvds__tcp_p2p_create));
INSTANTIATE_TEST_SUITE_P(Tcp, P2pOwnEngine, ::testing::Values(hvds__tcp_p2p_create));
INSTANTIATE_TEST_SUITE_P(Tcp, P2pContractRanks,
                         ::testing::Combine(::testing::Values(hvds__tcp_p2p_create),
                                            ::testing::Values(2, 3, 4)),
                         [](const auto& info) {
                           return "np" + std::to_string(std::get<1>(info.param));
                         });

// Every connection of the mesh has Nagle's algorithm off (small messages go at once).
TEST(TcpP2p, NagleIsOff) {
  RunRanks(3, [](int rank, hvds_p2p_t*, Gate& gate) {
    gate.Wait();
    if (rank == 0) {
      int connected = 0, nodelay = 0;
      DIR* d = opendir("/proc/self/fd");
      ASSERT_NE(d, nullptr);
      while (struct dirent* e = readdir(d)) {
        int fd = atoi(e->d_name), type = 0, on = 0;
        socklen_t len = sizeof type;
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) continue;
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &sl) != 0) continue;
        connected++;
        len = sizeof on;
        if (getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, &len) == 0 && on) nodelay++;
      }
      closedir(d);
      EXPECT_GE(connected, 6);  // 3 ranks x 2 connections
      EXPECT_EQ(nodelay, connected);
    }
    gate.Wait();
  });
}

}  // namespace
