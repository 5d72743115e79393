// Tests of the shared-memory transport with ranks as processes: forked children rendezvous
// through files in a temporary directory, report through their exit status and a message file.
// Real deaths: a rank killed with SIGKILL (left a zombie until the test reaps it), and one whose
// forked child still holds the segment and its lock.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "shm_p2p.h"
#include "shm_test_util.h"

namespace {

using namespace shm_test;

// A key-value store over files: set writes key's file atomically, get polls for it.
struct FileKv {
  std::string dir;
  hvds_kv_t kv() { return hvds_kv_t{this, &FileKv::Set, &FileKv::Get}; }
  std::string Path(const char* key) {
    std::string k = key;
    for (char& c : k)
      if (c == '/') c = '_';
    return dir + "/" + k;
  }
  static hvds_result_t Set(void* ctx, const char* key, const void* val, size_t len) {
    auto* self = static_cast<FileKv*>(ctx);
    std::string path = self->Path(key), tmp = path + ".tmp" + std::to_string(getpid());
    FILE* f = fopen(tmp.c_str(), "wb");
    if (f == nullptr) return HVDS_SYSTEM_ERROR;
    fwrite(val, 1, len, f);
    fclose(f);
    return rename(tmp.c_str(), path.c_str()) == 0 ? HVDS_SUCCESS : HVDS_SYSTEM_ERROR;
  }
  static hvds_result_t Get(void* ctx, const char* key, int timeout_ms, void** val, size_t* len) {
    auto* self = static_cast<FileKv*>(ctx);
    std::string path = self->Path(key);
    auto t0 = Clock::now();
    for (;;) {
      std::ifstream in(path, std::ios::binary);
      if (in) {
        std::stringstream ss;
        ss << in.rdbuf();
        std::string v = ss.str();
        *val = malloc(v.size() + 1);
        memcpy(*val, v.data(), v.size());
        *len = v.size();
        return HVDS_SUCCESS;
      }
      if (MsSince(t0) > timeout_ms) return HVDS_TIMEOUT;
      usleep(1000);
    }
  }
};

class Procs : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hvds_shm_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    kv_.dir = tmpl;
  }
  void TearDown() override {
    std::string cmd = "rm -rf " + kv_.dir;
    (void)system(cmd.c_str());
  }
  std::string MessageOf(int rank) {
    std::ifstream in(kv_.dir + "/msg" + std::to_string(rank));
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  // Forks n ranks; rank r runs body(r, p) and exits with its return value (after writing
  // p->error to msg<r>). Returns the pids; the caller reaps them with Reap.
  std::vector<pid_t> Fork(int n, const std::function<int(int, hvds_p2p_t*)>& body) {
    std::vector<pid_t> pids;
    for (int r = 0; r < n; r++) {
      pid_t pid = fork();
      if (pid == 0) {
        hvds_kv_t kv = kv_.kv();
        hvds_p2p_t* p = nullptr;
        char err[512] = "";
        if (hvds__shm_p2p_create(&kv, "job", r, n, nullptr, nullptr, 20000, &p, err, sizeof err) !=
            HVDS_SUCCESS) {
          fprintf(stderr, "rank %d: create: %s\n", r, err);
          _exit(90);
        }
        int rc = body(r, p);
        std::ofstream(kv_.dir + "/msg" + std::to_string(r)) << p->error;
        p->ops->destroy(p);
        _exit(rc);
      }
      pids.push_back(pid);
    }
    return pids;
  }
  static int Reap(pid_t pid) {
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  FileKv kv_;
};

// Every collective among 4 processes.
TEST_F(Procs, CollectivesAmongProcesses) {
  auto pids = Fork(4, [](int rank, hvds_p2p_t* p) {
    RunCollectives(rank, p);
    return ::testing::Test::HasFailure() ? 1 : 0;
  });
  for (size_t r = 0; r < pids.size(); r++) EXPECT_EQ(Reap(pids[r]), 0) << "rank " << r;
}

// Rank 2 is killed while rank 0 waits on it and rank 1 waits on rank 0. Both fail within a
// couple of seconds and name rank 2; the dead rank stays a zombie meanwhile.
TEST_F(Procs, KilledRankIsNamedWhileZombie) {
  auto pids = Fork(3, [](int rank, hvds_p2p_t* p) {
    int x = 0;
    if (rank == 2) {
      sleep_ms(300);
      raise(SIGKILL);
    }
    auto t0 = Clock::now();
    hvds_result_t rc = Wait(p, Irecv(p, rank == 0 ? 2 : 0, &x, 4, 1), 30000);
    if (MsSince(t0) > 5000) return 2;
    return rc == HVDS_REMOTE_ERROR && p->failed_peer == (rank == 0 ? 2 : 0) ? 0 : 1;
  });
  EXPECT_EQ(Reap(pids[0]), 0) << MessageOf(0);
  EXPECT_EQ(Reap(pids[1]), 0) << MessageOf(1);
  EXPECT_EQ(Reap(pids[2]), 128 + SIGKILL);
  EXPECT_NE(MessageOf(0).find("rank 2 (pid"), std::string::npos) << MessageOf(0);
  EXPECT_NE(MessageOf(0).find("exited"), std::string::npos) << MessageOf(0);
  EXPECT_NE(MessageOf(1).find("rank 2"), std::string::npos) << MessageOf(1);
}

// The killed rank had forked a child that inherited the segment (as a data-loader worker
// would): the lock stays held, the pid check still finds the rank dead.
TEST_F(Procs, KilledRankWithLiveChild) {
  auto pids = Fork(2, [](int rank, hvds_p2p_t* p) {
    int x = 0;
    if (rank == 1) {
      if (fork() == 0) {  // the child holds every descriptor of its parent
        sleep(6);
        _exit(0);
      }
      sleep_ms(300);
      raise(SIGKILL);
    }
    auto t0 = Clock::now();
    hvds_result_t rc = Wait(p, Irecv(p, 1, &x, 4, 1), 30000);
    if (MsSince(t0) > 5000) return 2;
    return rc == HVDS_REMOTE_ERROR && p->failed_peer == 1 ? 0 : 1;
  });
  EXPECT_EQ(Reap(pids[0]), 0) << MessageOf(0);
  EXPECT_EQ(Reap(pids[1]), 128 + SIGKILL);
}

// A rank exits in the middle of a large transfer: the sender blocked on a full ring fails.
TEST_F(Procs, ReceiverDiesMidTransfer) {
  auto pids = Fork(2, [](int rank, hvds_p2p_t* p) {
    std::vector<uint8_t> buf(size_t{64} << 20, 1);
    if (rank == 1) {
      hvds_p2p_req_t* r = Irecv(p, 0, buf.data(), 4096, 1);  // wrong size: never completes
      (void)r;
      sleep_ms(200);
      _exit(3);  // no destroy: as a crash
    }
    hvds_result_t rc = Wait(p, Isend(p, 1, buf.data(), buf.size(), 2), 30000);
    return rc == HVDS_REMOTE_ERROR && p->failed_peer == 1 ? 0 : 1;
  });
  EXPECT_EQ(Reap(pids[0]), 0) << MessageOf(0);
  EXPECT_EQ(Reap(pids[1]), 3);
}

}  // namespace
