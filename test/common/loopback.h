// TCP on 127.0.0.1 for the tests that talk to a server or pick its port themselves.
#ifndef HVDS_TEST_LOOPBACK_H_
#define HVDS_TEST_LOOPBACK_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>

namespace hvds_test {

inline sockaddr_in LoopbackAddress(int port) {
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// A connected socket to 127.0.0.1:port, or -1.
inline int DialLoopback(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a = LoopbackAddress(port);
  if (fd >= 0 && connect(fd, (sockaddr*)&a, sizeof(a)) == 0) return fd;
  if (fd >= 0) close(fd);
  return -1;
}

// A TCP port on 127.0.0.1 that was free a moment ago, or 0.
inline int FreeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a = LoopbackAddress(0);
  socklen_t len = sizeof(a);
  int port = 0;
  if (fd >= 0 && bind(fd, (sockaddr*)&a, sizeof(a)) == 0 &&
      getsockname(fd, (sockaddr*)&a, &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

}  // namespace hvds_test

#endif  // HVDS_TEST_LOOPBACK_H_
