// The enqueue side and the handle table, through the public API of a one-rank runtime (no
// launcher needed): ordering, duplicates, release of pending handles, outputs, shutdown.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../common/realtime_allowed.h"
#include "hvdsparse.h"

namespace {

hvds_tensor_t Floats(std::vector<float>& v) {
  hvds_tensor_t t = {v.data(), HVDS_FLOAT32, -1, 1, {(int64_t)v.size()}};
  return t;
}

class Queue : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(hvds_init(), HVDS_SUCCESS) << hvds_last_error(); }
  void TearDown() override { EXPECT_EQ(hvds_shutdown(), HVDS_SUCCESS); }
};

TEST_F(Queue, ManyOperationsCompleteWithTheirResults) {
  std::vector<std::vector<float>> data(500, std::vector<float>(3, 2.0f));
  std::vector<hvds_handle_t> hs(data.size());
  for (size_t i = 0; i < data.size(); i++) {
    hvds_tensor_t t = Floats(data[i]);
    hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
    std::string name = "t" + std::to_string(i);
    o.name = name.c_str();
    o.postscale = (double)i;
    ASSERT_EQ(hvds_allreduce_async(&t, &t, &o, &hs[i]), HVDS_SUCCESS);
  }
  for (size_t i = 0; i < data.size(); i++) {
    ASSERT_EQ(hvds_wait(hs[i], 10000), HVDS_SUCCESS) << hvds_handle_error(hs[i]);
    EXPECT_EQ(hvds_poll(hs[i]), 1);
    EXPECT_FLOAT_EQ(data[i][2], 2.0f * (float)i);
    hvds_release(hs[i]);
    EXPECT_EQ(hvds_poll(hs[i]), -1);  // a released id is never found again
  }
}

TEST_F(Queue, DuplicateNameRefusedWhileInFlight) {
  // At one rank an operation completes quickly, so queue both under one grouped call, which
  // checks its own names for duplicates, and check the single-call path right after.
  std::vector<float> a(4, 1.0f);
  hvds_tensor_t ts[2] = {Floats(a), Floats(a)};
  hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
  o.name = "same";
  hvds_handle_t h;
  ASSERT_EQ(hvds_grouped_allreduce_async(2, ts, ts, &o, &h), HVDS_SUCCESS);
  ASSERT_EQ(hvds_wait(h, 10000), HVDS_SUCCESS);
  hvds_release(h);
  ASSERT_EQ(hvds_allreduce_async(&ts[0], &ts[0], &o, &h), HVDS_SUCCESS);
  ASSERT_EQ(hvds_wait(h, 10000), HVDS_SUCCESS);
  hvds_release(h);
  // The same name again after completion is allowed.
  ASSERT_EQ(hvds_allreduce_async(&ts[0], &ts[0], &o, &h), HVDS_SUCCESS);
  ASSERT_EQ(hvds_wait(h, 10000), HVDS_SUCCESS);
  hvds_release(h);
}

TEST_F(Queue, ReleasingPendingHandlesIsSafe) {
  std::vector<std::vector<float>> data(200, std::vector<float>(1024, 1.0f));
  for (size_t i = 0; i < data.size(); i++) {
    hvds_tensor_t t = Floats(data[i]);
    hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
    std::string name = "r" + std::to_string(i);
    o.name = name.c_str();
    hvds_handle_t h;
    ASSERT_EQ(hvds_allreduce_async(&t, &t, &o, &h), HVDS_SUCCESS);
    hvds_release(h);  // forgotten at once; the runtime frees it when it completes
  }
  hvds_handle_t h;
  ASSERT_EQ(hvds_barrier_async(0, &h), HVDS_SUCCESS);
  ASSERT_EQ(hvds_wait(h, 10000), HVDS_SUCCESS);
  hvds_release(h);
}

// A barrier is a fence for the rank that queues it: when it completes, so has everything the
// rank queued before it (ReleasingPendingHandlesIsSafe frees its buffers on that promise).
TEST_F(Queue, ABarrierCompletesAfterEveryOperationQueuedBeforeIt) {
  // A few operations a round, so that the order names happen to take cannot hide a barrier
  // that runs before them.
  for (int round = 0; round < 100; round++) {
    std::vector<std::vector<float>> data(1 + round % 3, std::vector<float>(1024, 1.0f));
    std::vector<hvds_handle_t> hs(data.size());
    for (size_t i = 0; i < data.size(); i++) {
      hvds_tensor_t t = Floats(data[i]);
      hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
      std::string name = "fence" + std::to_string(round) + "." + std::to_string(i);
      o.name = name.c_str();
      ASSERT_EQ(hvds_allreduce_async(&t, &t, &o, &hs[i]), HVDS_SUCCESS);
    }
    hvds_handle_t b;
    ASSERT_EQ(hvds_barrier_async(0, &b), HVDS_SUCCESS);
    ASSERT_EQ(hvds_wait(b, 10000), HVDS_SUCCESS);
    hvds_release(b);
    int unfinished = 0;
    for (hvds_handle_t h : hs) unfinished += hvds_poll(h) != 1;
    EXPECT_EQ(unfinished, 0) << "round " << round;
    for (hvds_handle_t h : hs) {
      ASSERT_EQ(hvds_wait(h, 10000), HVDS_SUCCESS);
      hvds_release(h);
    }
  }
}

TEST_F(Queue, RuntimeOwnedOutputsCanBeTaken) {
  std::vector<float> a = {1, 2, 3, 4, 5, 6};
  hvds_tensor_t t = {a.data(), HVDS_FLOAT32, -1, 2, {3, 2}};
  hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
  o.name = "gather";
  hvds_handle_t h;
  ASSERT_EQ(hvds_allgather_async(&t, &o, &h), HVDS_SUCCESS);
  ASSERT_EQ(hvds_wait(h, 10000), HVDS_SUCCESS);
  hvds_tensor_t out;
  ASSERT_EQ(hvds_handle_output(h, 0, &out), HVDS_SUCCESS);
  EXPECT_EQ(out.ndim, 2);
  EXPECT_EQ(out.shape[0], 3);
  float* taken = (float*)hvds_handle_take_output(h, 0);
  ASSERT_NE(taken, nullptr);
  hvds_release(h);  // does not free what was taken
  EXPECT_EQ(memcmp(taken, a.data(), a.size() * sizeof(float)), 0);
  hvds_free(taken);
}

TEST_F(Queue, BadInputIsRefusedWithAMessage) {
  std::vector<float> a(4);
  hvds_tensor_t t = Floats(a);
  hvds_handle_t h;
  hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
  EXPECT_EQ(hvds_allreduce_async(&t, &t, &o, &h), HVDS_INVALID_ARGUMENT);  // no name
  o.name = "bad";
  t.dtype = (hvds_dtype_t)99;
  EXPECT_EQ(hvds_allreduce_async(&t, &t, &o, &h), HVDS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hvds_last_error()).find("bad"), std::string::npos);
  t = Floats(a);
  t.shape[0] = -1;
  EXPECT_EQ(hvds_allreduce_async(&t, &t, &o, &h), HVDS_INVALID_ARGUMENT);
  t = Floats(a);
  t.data = nullptr;
  EXPECT_EQ(hvds_allreduce_async(&t, &t, &o, &h), HVDS_INVALID_ARGUMENT);
  t = Floats(a);
  t.device = 0;  // host memory said to be on GPU 0: no device library, or CUDA refuses it
  EXPECT_NE(hvds_allreduce_async(&t, &t, &o, &h), HVDS_SUCCESS);
  EXPECT_NE(std::string(hvds_last_error()).find("'bad'"), std::string::npos) << hvds_last_error();
  t.device = -2;
  EXPECT_EQ(hvds_allreduce_async(&t, &t, &o, &h), HVDS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hvds_last_error()).find("neither the CPU"), std::string::npos);
  t = Floats(a);
  o.op = HVDS_ADASUM;  // reduces floating-point tensors only
  t.dtype = HVDS_INT32;
  EXPECT_EQ(hvds_allreduce_async(&t, &t, &o, &h), HVDS_INVALID_ARGUMENT);
  t = Floats(a);
  o.op = HVDS_SUM;
  o.process_set = 7;
  EXPECT_EQ(hvds_allreduce_async(&t, &t, &o, &h), HVDS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hvds_last_error()).find("does not exist"), std::string::npos);
  // Zero-size tensors are fine.
  hvds_tensor_t z = {nullptr, HVDS_FLOAT32, -1, 1, {0}};
  o.process_set = 0;
  o.name = "empty";
  ASSERT_EQ(hvds_allreduce_async(&z, &z, &o, &h), HVDS_SUCCESS);
  EXPECT_EQ(hvds_wait(h, 10000), HVDS_SUCCESS);
  hvds_release(h);
}

TEST(QueueLifecycle, UseBeforeInitAndAfterShutdown) {
  std::vector<float> a(4);
  hvds_tensor_t t = Floats(a);
  hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
  o.name = "x";
  hvds_handle_t h;
  EXPECT_EQ(hvds_rank(), -1);
  EXPECT_EQ(hvds_allreduce_async(&t, &t, &o, &h), HVDS_INVALID_USAGE);
  EXPECT_NE(std::string(hvds_last_error()).find("has not been initialized"), std::string::npos);
  ASSERT_EQ(hvds_init(), HVDS_SUCCESS);
  EXPECT_EQ(hvds_init(), HVDS_SUCCESS);  // idempotent
  EXPECT_EQ(hvds_rank(), 0);
  EXPECT_EQ(hvds_size(), 1);
  ASSERT_EQ(hvds_shutdown(), HVDS_SUCCESS);
  EXPECT_EQ(hvds_shutdown(), HVDS_SUCCESS);
  EXPECT_EQ(hvds_allreduce_async(&t, &t, &o, &h), HVDS_INVALID_USAGE);
}

// In a child forked while the runtime runs (and in its own child) queries answer and operations
// are refused, naming the fork; the parent's runtime carries on. After shutdown a child is no
// copy: it may start a runtime of its own.
int ForkedChildExitCode(bool runtime_running) {
  pid_t pid = fork();
  if (pid == 0) {
    std::vector<float> a(4, 1.0f);
    hvds_tensor_t t = Floats(a);
    hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
    o.name = "in.child";
    hvds_handle_t h;
    if (runtime_running) {
      if (hvds_rank() != 0 || hvds_size() != 1) _exit(2);
      if (hvds_allreduce_async(&t, &t, &o, &h) != HVDS_INVALID_USAGE) _exit(3);
      if (!strstr(hvds_last_error(), "was forked from rank 0")) _exit(4);
      pid_t grandchild = fork();  // a copy of a copy is one too
      if (grandchild == 0)
        _exit(hvds_allreduce_async(&t, &t, &o, &h) == HVDS_INVALID_USAGE ? 0 : 5);
      int st = 0;
      waitpid(grandchild, &st, 0);
      _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 6);
    }
    if (hvds_init() != HVDS_SUCCESS) _exit(7);
    int rc =
        hvds_allreduce_async(&t, &t, &o, &h) == HVDS_SUCCESS && hvds_wait(h, 10000) == HVDS_SUCCESS
            ? 0
            : 8;
    hvds_shutdown();
    _exit(rc);
  }
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
}

TEST(QueueLifecycle, AForkedCopyIsRefusedAndTheOwnerCarriesOn) {
  ASSERT_EQ(hvds_init(), HVDS_SUCCESS) << hvds_last_error();
  EXPECT_EQ(ForkedChildExitCode(true), 0);
  std::vector<float> a(4, 3.0f);
  hvds_tensor_t t = Floats(a);
  hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
  o.name = "after.fork";
  hvds_handle_t h;
  ASSERT_EQ(hvds_allreduce_async(&t, &t, &o, &h), HVDS_SUCCESS) << hvds_last_error();
  EXPECT_EQ(hvds_wait(h, 10000), HVDS_SUCCESS);
  hvds_release(h);
  EXPECT_FLOAT_EQ(a[0], 3.0f);
  ASSERT_EQ(hvds_shutdown(), HVDS_SUCCESS);
  EXPECT_EQ(ForkedChildExitCode(false), 0);
  ASSERT_EQ(hvds_init(), HVDS_SUCCESS) << hvds_last_error();  // and the parent again
  EXPECT_EQ(hvds_rank(), 0);
  ASSERT_EQ(hvds_shutdown(), HVDS_SUCCESS);
}

}  // namespace

namespace {

// Threads of this process whose scheduling policy is real-time round-robin (field 41 of
// /proc/self/task/<tid>/stat; the command name before it may hold spaces, so count from ')').
int RoundRobinThreads() {
  int n = 0;
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return -1;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(std::string("/proc/self/task/") + e->d_name + "/stat");
    std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    size_t name_end = stat.rfind(')');
    if (name_end == std::string::npos || name_end + 2 > stat.size()) continue;  // it just ended
    std::istringstream rest(stat.substr(name_end + 2));
    std::string field;
    for (int i = 3; i <= 41 && rest >> field; i++) {
      if (i == 41 && field == std::to_string(SCHED_RR)) n++;
    }
  }
  closedir(d);
  return n;
}

// RoundRobinThreads() once it equals want, or its last count after 5 s: the coordinator thread
// raises its own priority when it starts, which can come after hvds_init() returns.
int RoundRobinThreadsSettled(int want) {
  int n = RoundRobinThreads();
  for (int i = 0; i < 500 && n != want; i++) {
    usleep(10000);
    n = RoundRobinThreads();
  }
  return n;
}

}  // namespace

// HVDSPARSE_COORDINATOR_PRIORITY=auto gives the coordinator thread, and only it, real-time
// round-robin where the process may; the default leaves every thread as it was.
TEST(QueueLifecycle, CoordinatorPriority) {
  const char* outer = getenv("HVDSPARSE_COORDINATOR_PRIORITY");  // the default, whatever is set
  std::string kept = outer ? outer : "";
  unsetenv("HVDSPARSE_COORDINATOR_PRIORITY");
  unsetenv("HOROVOD_COORDINATOR_PRIORITY");
  ASSERT_EQ(hvds_init(), HVDS_SUCCESS) << hvds_last_error();
  EXPECT_EQ(RoundRobinThreads(), 0);
  ASSERT_EQ(hvds_shutdown(), HVDS_SUCCESS);
  setenv("HVDSPARSE_COORDINATOR_PRIORITY", "auto", 1);
  ASSERT_EQ(hvds_init(), HVDS_SUCCESS) << hvds_last_error();
  if (outer) {
    setenv("HVDSPARSE_COORDINATOR_PRIORITY", kept.c_str(), 1);
  } else {
    unsetenv("HVDSPARSE_COORDINATOR_PRIORITY");
  }
  int want = RealtimeAllowed() ? 1 : 0;
  EXPECT_EQ(RoundRobinThreadsSettled(want), want);
  EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
  ASSERT_EQ(hvds_shutdown(), HVDS_SUCCESS);
}

// A binding's preference (DeAR asks for "auto") applies to the running coordinator and to later
// inits, unless the environment says otherwise.
TEST(QueueLifecycle, PreferredCoordinatorPriority) {
  const char* outer = getenv("HVDSPARSE_COORDINATOR_PRIORITY");
  std::string kept = outer ? outer : "";
  unsetenv("HVDSPARSE_COORDINATOR_PRIORITY");
  unsetenv("HOROVOD_COORDINATOR_PRIORITY");
  int want = RealtimeAllowed() ? 1 : 0;
  EXPECT_EQ(hvds_prefer_coordinator_priority("fastest"), HVDS_INVALID_ARGUMENT);
  ASSERT_EQ(hvds_init(), HVDS_SUCCESS) << hvds_last_error();
  EXPECT_EQ(RoundRobinThreads(), 0);
  ASSERT_EQ(hvds_prefer_coordinator_priority("auto"), HVDS_SUCCESS);
  EXPECT_EQ(RoundRobinThreadsSettled(want), want);  // the running coordinator
  ASSERT_EQ(hvds_shutdown(), HVDS_SUCCESS);
  ASSERT_EQ(hvds_init(), HVDS_SUCCESS) << hvds_last_error();
  EXPECT_EQ(RoundRobinThreadsSettled(want), want);  // the next init's
  ASSERT_EQ(hvds_shutdown(), HVDS_SUCCESS);
  setenv("HVDSPARSE_COORDINATOR_PRIORITY", "normal", 1);  // the environment wins
  ASSERT_EQ(hvds_init(), HVDS_SUCCESS) << hvds_last_error();
  EXPECT_EQ(RoundRobinThreadsSettled(0), 0);
  ASSERT_EQ(hvds_shutdown(), HVDS_SUCCESS);
  ASSERT_EQ(hvds_prefer_coordinator_priority("normal"), HVDS_SUCCESS);  // as the process began
  if (outer) {
    setenv("HVDSPARSE_COORDINATOR_PRIORITY", kept.c_str(), 1);
  } else {
    unsetenv("HVDSPARSE_COORDINATOR_PRIORITY");
  }
}
