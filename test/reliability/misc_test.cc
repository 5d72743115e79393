// A timeline on a full disk, C API misuse at several sizes, and the security promises that a job
// can show from outside: secrets stay out of logs and the timeline, a wrong secret is refused and
// logged without being echoed, the launcher's store listens on loopback only for a local job.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "../common/loopback.h"
#include "harness.h"

namespace {

std::vector<std::string> Job(int np, const std::vector<std::string>& tail) {
  std::vector<std::string> argv = {HVDS_LAUNCHER, "run", "-np", std::to_string(np)};
  argv.insert(argv.end(), tail.begin(), tail.end());
  return argv;
}

// A tmpfs of `size` mounted on a fresh directory for the test's lifetime (needs root).
class Tmpfs {
 public:
  explicit Tmpfs(const std::string& size) : dir_(rel::TempDir("tmpfs")) {
    std::string opts = "size=" + size + ",mode=0755";
    mounted_ = mount("tmpfs", dir_.c_str(), "tmpfs", 0, opts.c_str()) == 0;
    if (!mounted_) why_ = std::string("mount tmpfs: ") + strerror(errno);
  }
  ~Tmpfs() {
    if (mounted_) umount2(dir_.c_str(), MNT_DETACH);
    rel::RemoveTree(dir_);
  }
  bool ok() const { return mounted_; }
  const std::string& why() const { return why_; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_, why_;
  bool mounted_ = false;
};

long FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? (long)st.st_size : -1;
}

// Fills the file system holding dir until a write fails.
void FillUp(const std::string& dir) {
  FILE* f = fopen((dir + "/filler").c_str(), "w");
  static char block[4096];
  while (f && fwrite(block, 1, sizeof(block), f) == sizeof(block) && fflush(f) == 0) {
  }
  if (f) fclose(f);
}

bool ValidJson(const std::string& path) {
  rel::Proc py({"python3", "-c", "import json,sys; json.load(open(sys.argv[1]))", path}, {});
  return py.Wait(60) == 0;
}

// The timeline fills a 64 KiB tmpfs mid-job: a warning, the job goes on and its results hold.
TEST(Timeline, FullDiskWarnsAndTrainingContinues) {
  ASSERT_EQ(geteuid(), 0u) << "this test mounts a tmpfs and needs root; it does not skip";
  Tmpfs fs("64k");
  ASSERT_TRUE(fs.ok()) << fs.why();
  std::string path = fs.dir() + "/timeline.json";
  rel::Proc job(Job(4, {HVDS_REL_WORKER, "mixed", "300"}),
                {"HVDSPARSE_TIMELINE=" + path, "HVDSPARSE_TIMELINE_MARK_CYCLES=1"});
  int rc = job.Wait(300);
  std::string out = job.output();
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(job.Count("PASS mixed rank"), 4) << out;
  EXPECT_NE(out.find("No space left on device"), std::string::npos) << out;
  EXPECT_NE(out.find("timeline"), std::string::npos);
  long size = FileSize(path);
  std::printf("timeline file: %ld bytes on a 64 KiB tmpfs\n", size);
  EXPECT_GT(size, 0);
  EXPECT_LE(size, 64 * 1024);
  // The file keeps the events written before the disk filled, as a valid JSON array.
  EXPECT_TRUE(ValidJson(path));
}

// The disk is already full when the timeline starts: it is not started, with a warning.
TEST(Timeline, DiskFullFromTheStartWarnsAndTrainingContinues) {
  ASSERT_EQ(geteuid(), 0u) << "this test mounts a tmpfs and needs root; it does not skip";
  Tmpfs fs("64k");
  ASSERT_TRUE(fs.ok()) << fs.why();
  FillUp(fs.dir());
  std::string path = fs.dir() + "/timeline.json";
  rel::Proc job(Job(2, {HVDS_REL_WORKER, "mixed", "50"}), {"HVDSPARSE_TIMELINE=" + path});
  int rc = job.Wait(300);
  std::string out = job.output();
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(job.Count("PASS mixed rank"), 2) << out;
  EXPECT_NE(out.find("timeline not started"), std::string::npos) << out;
}

// The misuse worker at sizes 1, 2 and 3 under the launcher, and once on its own (no launcher).
class Misuse : public ::testing::TestWithParam<int> {};

TEST_P(Misuse, ClearErrorOrCorrectResultNeverACrash) {
  int np = GetParam();
  std::vector<std::string> argv = np > 0 ? Job(np, {HVDS_MISUSE_WORKER})
                                         : std::vector<std::string>{HVDS_MISUSE_WORKER};
  rel::Proc job(argv, {});
  int rc = job.Wait(240);
  std::string out = job.output();
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(job.Count("MISUSE FAIL"), 0) << out;
  EXPECT_EQ(job.Count("PASS misuse rank"), np > 0 ? np : 1) << out;
  std::printf("%d checks passed on rank 0\n", job.Count("ok "));
}

INSTANTIATE_TEST_SUITE_P(Sizes, Misuse, ::testing::Values(0, 1, 2, 3),
                         [](const auto& info) {
                           return info.param ? "np" + std::to_string(info.param)
                                             : std::string("alone");
                         });

// Runs a verbose, TRACE-logged job with a timeline; the secret the launcher made (written by rank
// 0 to a file, never printed) must appear neither in the output nor in the timeline.
TEST(Security, SecretNeverInLogsOrTimeline) {
  std::string dir = rel::TempDir("secret");
  std::string secret_file = dir + "/secret", timeline = dir + "/timeline.json";
  rel::Proc job({HVDS_LAUNCHER, "run", "--verbose", "-np", "2", HVDS_REL_WORKER, "mixed", "20"},
                {"HVDSPARSE_LOG_LEVEL=TRACE", "HVDSPARSE_TIMELINE=" + timeline,
                 "REL_SECRET_FILE=" + secret_file});
  int rc = job.Wait(240);
  std::string out = job.output();
  ASSERT_EQ(rc, 0) << out;
  std::string secret = rel::ReadFile(secret_file);
  ASSERT_GE(secret.size(), 32u) << "no secret recorded";
  std::string tl = rel::ReadFile(timeline);
  EXPECT_GT(tl.size(), 100u);
  // Any 16 consecutive characters of the secret would be a leak.
  for (size_t i = 0; i + 16 <= secret.size(); i += 8) {
    std::string piece = secret.substr(i, 16);
    EXPECT_EQ(out.find(piece), std::string::npos) << "secret in the output";
    EXPECT_EQ(tl.find(piece), std::string::npos) << "secret in the timeline";
  }
  std::printf("%zu lines of TRACE output and %zu bytes of timeline hold no part of the secret\n",
              job.lines().size(), tl.size());
  rel::RemoveTree(dir);
}

// One HELLO frame (see runtime/store/store_proto.h): length, type 1, secret as a string.
std::string Hello(const std::string& secret) {
  std::string body(1, '\x01');
  uint32_t n = htonl((uint32_t)secret.size());
  body.append((const char*)&n, 4).append(secret);
  uint32_t len = htonl((uint32_t)body.size());
  return std::string((const char*)&len, 4) + body;
}

// Sends bytes to 127.0.0.1:port; returns the type of the first reply frame, 0 when the server
// closed the connection without one, -1 when it could not connect.
int Probe(int port, const std::string& bytes) {
  int fd = hvds_test::DialLoopback(port);
  if (fd < 0) return -1;
  (void)!write(fd, bytes.data(), bytes.size());
  unsigned char reply[5];
  ssize_t got = recv(fd, reply, sizeof(reply), MSG_WAITALL);
  close(fd);
  return got == 5 ? reply[4] : 0;
}

// The listening sockets on port: their local addresses as /proc/net/tcp writes them.
std::vector<std::string> Listeners(int port) {
  std::vector<std::string> found;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) {
      char local[128];
      unsigned state;
      if (sscanf(line.c_str(), "%*d: %127s %*s %x", local, &state) != 2 || state != 0x0A) continue;
      const char* colon = strrchr(local, ':');
      if (colon && strtol(colon + 1, nullptr, 16) == port) found.push_back(local);
    }
  }
  return found;
}

// While a local job runs: its store listens on 127.0.0.1 only; a client with a wrong secret, or
// one that sends an oversized first frame, is refused and logged, and the wrong secret is not
// echoed; the job is unaffected.
TEST(Security, StoreRefusesWrongSecretsAndListensOnLoopbackOnly) {
  rel::Proc job({HVDS_LAUNCHER, "run", "-np", "2", HVDS_REL_WORKER, "mixed", "20"},
                {"REL_PAUSE_MS=3000", "HVDSPARSE_LOG_LEVEL=INFO"});
  ASSERT_TRUE(job.WaitFor("STORE port=", 60)) << job.output();
  int port = 0;
  for (const auto& l : job.lines())
    if (l.text.find("STORE port=") != std::string::npos)
      port = std::atoi(rel::Field(l.text.substr(l.text.find("STORE")), "port").c_str());
  ASSERT_GT(port, 0);
  std::vector<std::string> listeners = Listeners(port);
  ASSERT_EQ(listeners.size(), 1u);
  EXPECT_EQ(listeners[0].substr(0, 9), "0100007F:") << listeners[0] << " is not 127.0.0.1";
  std::string wrong = "not-the-secret-0123456789abcdef0123456789abcdef";
  EXPECT_EQ(Probe(port, Hello(wrong)), 3) << "no DENIED reply";  // HVDS_STORE_MSG_DENIED
  std::string big(4, '\0');
  big[1] = '\x10';  // a first frame declaring 1 MiB: far above the HELLO limit
  EXPECT_NE(Probe(port, big), 2) << "an oversized first frame was accepted";
  int rc = job.Wait(240);
  std::string out = job.output();
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(job.Count("PASS mixed rank"), 2) << out;
  EXPECT_NE(out.find("refused connection from 127.0.0.1"), std::string::npos) << out;
  EXPECT_NE(out.find("wrong secret"), std::string::npos) << out;
  EXPECT_EQ(out.find(wrong), std::string::npos) << "the wrong secret was echoed";
}

}  // namespace
