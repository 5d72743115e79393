// The rendezvous store's limits (runtime/store/store_proto.h and store_server.c): the number of
// keys, the size of a frame, the replies a connection may leave unread, and running out of
// descriptors. Each is hit on purpose; the server must refuse or shed the offender and go on
// serving everyone else.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "../common/loopback.h"
#include "store.h"
#include "store_proto.h"
#include "store_table.h"

namespace {

constexpr const char* kSecret = "limits-test-secret-0123456789abcdef";

struct Server {
  hvds_store_server_t* srv = nullptr;
  int port = 0;
  Server() { EXPECT_EQ(hvds__store_server_start("127.0.0.1", 0, kSecret, &srv, &port), HVDS_SUCCESS); }
  ~Server() { hvds__store_server_stop(srv); }
};

// One frame of the wire format.
std::string Frame(const hvds_store_msg_t& m) {
  hvds_store_buf_t b = {};
  EXPECT_EQ(hvds__store_encode(&m, &b), HVDS_SUCCESS);
  std::string s((const char*)b.data, b.len);
  hvds__store_buf_free(&b);
  return s;
}

int Dial(int port) { return hvds_test::DialLoopback(port); }

// A raw connection that has said HELLO with the right secret.
int AuthedRaw(int port) {
  int fd = Dial(port);
  hvds_store_msg_t hello = {};
  hello.type = HVDS_STORE_MSG_HELLO;
  hello.key = kSecret;
  hello.key_len = strlen(kSecret);
  std::string f = Frame(hello);
  EXPECT_EQ(write(fd, f.data(), f.size()), (ssize_t)f.size());
  unsigned char ok[5];
  EXPECT_EQ(recv(fd, ok, 5, MSG_WAITALL), 5);
  EXPECT_EQ(ok[4], HVDS_STORE_MSG_OK);
  return fd;
}

// A well-behaved client can still set and read a key (connecting within timeout_ms).
void StillServes(int port, const char* key, int timeout_ms = 5000) {
  hvds_store_t* c = nullptr;
  char err[256];
  ASSERT_EQ(hvds__store_connect("127.0.0.1", port, kSecret, timeout_ms, &c, err, sizeof(err)),
            HVDS_SUCCESS) << err;
  ASSERT_EQ(hvds__store_set(c, key, "v", 1), HVDS_SUCCESS);
  void* v = nullptr;
  size_t len = 0;
  ASSERT_EQ(hvds__store_get(c, key, 1000, &v, &len), HVDS_SUCCESS);
  EXPECT_EQ(len, 1u);
  free(v);
  hvds__store_close(c);
}

long RssKb() {
  FILE* f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  while (f && fgets(line, sizeof(line), f))
    if (strncmp(line, "VmRSS:", 6) == 0) kb = atol(line + 6);
  if (f) fclose(f);
  return kb;
}

double CpuSeconds() {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

TEST(StoreLimits, KeyCountIsCappedOverwritesStillWork) {
  hvds_store_table_t t = {};
  char key[32];
  for (unsigned i = 0; i < HVDS_STORE_MAX_KEYS; i++) {
    int n = snprintf(key, sizeof(key), "k%u", i);
    ASSERT_EQ(hvds__store_table_set(&t, key, (size_t)n, "x", 1), HVDS_SUCCESS) << i;
  }
  EXPECT_EQ(hvds__store_table_set(&t, "one-more", 8, "x", 1), HVDS_INVALID_ARGUMENT);
  EXPECT_EQ(hvds__store_table_set(&t, "k7", 2, "yy", 2), HVDS_SUCCESS);  // an overwrite
  hvds__store_table_free(&t);
}

// An authenticated client that declares a frame above the limit loses its connection before the
// server allocates anything; the others are served on.
TEST(StoreLimits, OversizedFrameDropsOnlyThatConnection) {
  Server s;
  int fd = AuthedRaw(s.port);
  uint32_t huge = htonl(0x7fffffffu);
  ASSERT_EQ(write(fd, &huge, 4), 4);
  char b;
  EXPECT_EQ(recv(fd, &b, 1, 0), 0) << "the server kept the connection";
  close(fd);
  StillServes(s.port, "after-oversize");
}

// A client that asks for a 1 MiB value 2,000 times and never reads the answers (2 GB of replies)
// cannot make the server hold more than a few MiB for it.
TEST(StoreLimits, UnreadRepliesAreBounded) {
  Server s;
  int fd = AuthedRaw(s.port);
  std::string big(1 << 20, 'b');
  hvds_store_msg_t set = {};
  set.type = HVDS_STORE_MSG_SET;
  set.key = "big";
  set.key_len = 3;
  set.val = big.data();
  set.val_len = big.size();
  std::string f = Frame(set);
  ASSERT_EQ(write(fd, f.data(), f.size()), (ssize_t)f.size());
  unsigned char ok[5];
  ASSERT_EQ(recv(fd, ok, 5, MSG_WAITALL), 5);
  long before = RssKb();
  hvds_store_msg_t get = {};
  get.type = HVDS_STORE_MSG_GET;
  get.key = "big";
  get.key_len = 3;
  std::string gets;
  for (int i = 0; i < 2000; i++) gets += Frame(get);
  // Non-blocking: the server stops reading once its replies pile up, so this write stalls.
  size_t sent = 0;
  for (int tries = 0; tries < 200 && sent < gets.size(); tries++) {
    ssize_t n = send(fd, gets.data() + sent, gets.size() - sent, MSG_DONTWAIT);
    if (n > 0) sent += (size_t)n;
    usleep(5000);
  }
  usleep(500000);  // time for the server to answer what it will
  long grew = RssKb() - before;
  std::printf("client sent %zu of %zu request bytes; server process grew %ld KiB\n", sent,
              gets.size(), grew);
  EXPECT_LT(grew, 64 * 1024) << "the server buffered the unread replies";
  StillServes(s.port, "after-unread");
  close(fd);
}

// With its descriptors used up by connections that never say HELLO, the server neither spins
// nor stops: once they go, it accepts again.
TEST(StoreLimits, OutOfDescriptorsPausesInsteadOfSpinning) {
  Server s;
  struct rlimit old;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  // This process (the server's) may hold only a few dozen more descriptors: the limit is set
  // before any connection arrives (set later, the server may already hold more than it allows).
  int open_now = 0;
  for (int fd = 0; fd < 4096; fd++) open_now += fcntl(fd, F_GETFD) != -1;
  struct rlimit low = {(rlim_t)open_now + 40, old.rlim_max};
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  pid_t child = fork();
  if (child == 0) {
    setrlimit(RLIMIT_NOFILE, &old);  // the client side needs its 400 descriptors
    close(pipefd[0]);
    for (int i = 0; i < 400; i++) Dial(s.port);  // kept open, never a word
    (void)!write(pipefd[1], "x", 1);
    pause();
    _exit(0);
  }
  close(pipefd[1]);
  char b;
  ASSERT_EQ(read(pipefd[0], &b, 1), 1);
  close(pipefd[0]);
  double cpu0 = CpuSeconds();
  sleep(1);
  double spent = CpuSeconds() - cpu0;
  std::printf("CPU used by the server in 1 s with its descriptors exhausted: %.3f s\n", spent);
  EXPECT_LT(spent, 0.3) << "the server spins on accept()";
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
  // The server first drains the dead connections still queued for accept(), 40 descriptors at a
  // time with a 100 ms pause at each EMFILE; under a sanitizer on loaded cores that can take
  // several seconds.
  StillServes(s.port, "after-emfile", 20000);
}

}  // namespace
