// The coordinator thread's priority: real-time round-robin 1 where the process may have it, nice
// -10 where only that is allowed, the default otherwise; only the calling thread changes.
#include "thread_priority.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <thread>

#include "../common/realtime_allowed.h"

namespace {

struct Outcome {
  int rc = 0, policy = -1, rt_priority = -1, nice = 99;
  std::string got, why;
};

int OwnNice() { return getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid)); }

// Raises a fresh thread's priority and reports what that thread then runs at.
Outcome RaiseInThread(hvds_priority_mode_t mode) {
  Outcome o;
  std::thread t([&] {
    char got[64], why[160];
    o.rc = hvds__priority_raise_self(mode, got, sizeof got, why, sizeof why);
    o.got = got;
    o.why = why;
    struct sched_param sp;
    o.policy = sched_getscheduler(0);
    o.rt_priority = sched_getparam(0, &sp) == 0 ? sp.sched_priority : -1;
    o.nice = OwnNice();
  });
  t.join();
  return o;
}

// Runs body in a child process whose privileges were taken away (another user, no real-time
// priority, no lower nice); returns the child's exit status, 0 when every check of body held.
// Needs root to change user; the caller checks geteuid().
template <typename Body>
int InUnprivilegedChild(Body body) {
  pid_t pid = fork();
  if (pid == 0) {
    struct rlimit none = {0, 0};
    if (setrlimit(RLIMIT_RTPRIO, &none) != 0 || setrlimit(RLIMIT_NICE, &none) != 0) _exit(90);
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(91);
    _exit(body());
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

TEST(ThreadPriority, ParsesTheThreeModes) {
  EXPECT_EQ(hvds__priority_mode_parse(nullptr), HVDS_PRIORITY_NORMAL);
  EXPECT_EQ(hvds__priority_mode_parse(""), HVDS_PRIORITY_NORMAL);
  EXPECT_EQ(hvds__priority_mode_parse("auto"), HVDS_PRIORITY_AUTO);
  EXPECT_EQ(hvds__priority_mode_parse("realtime"), HVDS_PRIORITY_REALTIME);
  EXPECT_EQ(hvds__priority_mode_parse("normal"), HVDS_PRIORITY_NORMAL);
  EXPECT_EQ(hvds__priority_mode_parse("high"), -1);
  EXPECT_EQ(hvds__priority_mode_parse("Auto"), -1);
}

TEST(ThreadPriority, NormalLeavesTheThreadAsItWas) {
  Outcome o = RaiseInThread(HVDS_PRIORITY_NORMAL);
  EXPECT_EQ(o.rc, 0);
  EXPECT_EQ(o.got, "normal");
  EXPECT_EQ(o.why, "");
  EXPECT_EQ(o.policy, SCHED_OTHER);
  EXPECT_EQ(o.nice, OwnNice());
}

TEST(ThreadPriority, RealtimeWhereAllowedAndOnlyForTheCallingThread) {
  bool allowed = RealtimeAllowed();
  Outcome o = RaiseInThread(HVDS_PRIORITY_REALTIME);
  if (allowed) {
    EXPECT_EQ(o.rc, 0);
    EXPECT_EQ(o.got, "real-time round-robin 1");
    EXPECT_EQ(o.policy, SCHED_RR);
    EXPECT_EQ(o.rt_priority, 1);
  } else {
    EXPECT_EQ(o.rc, -1);
    EXPECT_EQ(o.policy, SCHED_OTHER);
    EXPECT_NE(o.why.find("RLIMIT_RTPRIO"), std::string::npos) << o.why;
  }
  EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);  // this thread is untouched
}

TEST(ThreadPriority, DropReturnsToTheDefault) {
  int policy = -1, nice = 99;
  std::thread t([&] {
    char got[64], why[160];
    hvds__priority_raise_self(HVDS_PRIORITY_AUTO, got, sizeof got, why, sizeof why);
    hvds__priority_drop_self();
    policy = sched_getscheduler(0);
    nice = OwnNice();
  });
  t.join();
  EXPECT_EQ(policy, SCHED_OTHER);
  EXPECT_EQ(nice, 0);
}

TEST(ThreadPriority, AutoWithoutAnyPrivilegeStaysNormal) {
  if (geteuid() != 0) {  // this process is the unprivileged case, unless limits allow more
    Outcome o = RaiseInThread(HVDS_PRIORITY_AUTO);
    if (!RealtimeAllowed()) {
      EXPECT_NE(o.got, "real-time round-robin 1");
    }
    EXPECT_EQ(o.rc == 0, o.got != "normal");
    return;
  }
  int status = InUnprivilegedChild([] {
    Outcome o = RaiseInThread(HVDS_PRIORITY_AUTO);
    if (o.rc != -1 || o.got != "normal" || o.policy != SCHED_OTHER || o.nice != 0) return 1;
    if (o.why.find("RLIMIT_RTPRIO") == std::string::npos) return 2;
    if (RaiseInThread(HVDS_PRIORITY_REALTIME).rc != -1) return 3;
    return 0;
  });
  EXPECT_EQ(status, 0);
}

TEST(ThreadPriority, AutoFallsBackToNiceWhereRealtimeIsRefused) {
  int (*real)(void) = hvds__priority_set_realtime;
  hvds__priority_set_realtime = [] { return EPERM; };
  Outcome o = RaiseInThread(HVDS_PRIORITY_AUTO);
  Outcome strict = RaiseInThread(HVDS_PRIORITY_REALTIME);
  hvds__priority_set_realtime = real;
  EXPECT_EQ(strict.rc, -1);
  EXPECT_EQ(strict.policy, SCHED_OTHER);
  EXPECT_NE(o.why.find("Operation not permitted"), std::string::npos) << o.why;
  EXPECT_EQ(o.policy, SCHED_OTHER);
  struct rlimit lim;
  ASSERT_EQ(getrlimit(RLIMIT_NICE, &lim), 0);
  if (geteuid() == 0 || lim.rlim_cur >= 30) {  // lowering nice to -10 is allowed here
    EXPECT_EQ(o.rc, 0);
    EXPECT_EQ(o.got, "nice -10");
    EXPECT_EQ(o.nice, -10);
  } else {
    EXPECT_EQ(o.rc, -1);
    EXPECT_EQ(o.got, "normal");
    EXPECT_EQ(o.nice, OwnNice());
  }
  EXPECT_EQ(OwnNice(), 0);  // the calling thread of the test kept its nice value
}

TEST(ThreadPriority, LevelsOfWhatTheCoordinatorGot) {
  EXPECT_EQ(hvds__priority_level("real-time round-robin 1"), 2);
  EXPECT_EQ(hvds__priority_level("nice -10"), 1);
  EXPECT_EQ(hvds__priority_level("normal"), 0);
}

// A caller that runs the coordinator's cycle borrows its level and gives it back after.
TEST(ThreadPriority, LendAndRestore) {
  struct Seen {
    int lent = -1, policy = -1, nice = 99, policy_after = -1, nice_after = 99;
  };
  auto loan = [](int level) {
    Seen s;
    std::thread t([&] {
      hvds_priority_saved_t saved;
      hvds__priority_lend(level, &saved);
      s.lent = saved.lent;
      s.policy = sched_getscheduler(0);
      s.nice = OwnNice();
      hvds__priority_restore(&saved);
      s.policy_after = sched_getscheduler(0);
      s.nice_after = OwnNice();
    });
    t.join();
    return s;
  };
  Seen none = loan(0);
  EXPECT_EQ(none.lent, 0);
  EXPECT_EQ(none.policy, SCHED_OTHER);
  EXPECT_EQ(none.nice, 0);

  Seen rt = loan(2);
  EXPECT_EQ(rt.lent, RealtimeAllowed() ? 1 : 0);
  EXPECT_EQ(rt.policy, RealtimeAllowed() ? SCHED_RR : SCHED_OTHER);
  EXPECT_EQ(rt.policy_after, SCHED_OTHER);
  EXPECT_EQ(rt.nice_after, 0);

  struct rlimit lim;
  ASSERT_EQ(getrlimit(RLIMIT_NICE, &lim), 0);
  bool may_lower = geteuid() == 0 || lim.rlim_cur >= 30;
  Seen nice = loan(1);
  EXPECT_EQ(nice.lent, may_lower ? 1 : 0);
  EXPECT_EQ(nice.nice, may_lower ? -10 : 0);
  EXPECT_EQ(nice.policy, SCHED_OTHER);
  EXPECT_EQ(nice.nice_after, 0);

  int (*real)(void) = hvds__priority_set_realtime;
  hvds__priority_set_realtime = [] { return EPERM; };
  Seen refused = loan(2);
  hvds__priority_set_realtime = real;
  EXPECT_EQ(refused.lent, 0);
  EXPECT_EQ(refused.policy, SCHED_OTHER);
}
