// Running a job under a deadline for the multi-process tests: the command gets its own process
// group, its stdout and stderr are collected together, and at the deadline that group (the
// processes this test started, and nothing else) is killed, so a hang fails instead of blocking.
#ifndef HVDS_TEST_RUN_COMMAND_H_
#define HVDS_TEST_RUN_COMMAND_H_

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "child_exec.h"

struct RunResult {
  int status = -1;     // exit code, 128 + signal, or -1 if killed by the deadline
  std::string output;  // stdout and stderr interleaved
  double seconds = 0;
};

// Runs argv with extra NAME=VALUE environment for at most timeout_s seconds.
inline RunResult RunCommand(const std::vector<std::string>& argv,
                            const std::vector<std::string>& env, int timeout_s) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    close(fds[0]);
    hvds_test::ExecInChild(argv, env, fds[1]);
  }
  setpgid(pid, pid);  // both sides set it, so the group exists before either relies on it
  close(fds[1]);
  RunResult r;
  char buf[65536];
  bool timed_out = false;
  for (;;) {
    double left = timeout_s - elapsed();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    struct pollfd p = {fds[0], POLLIN, 0};
    if (poll(&p, 1, (int)(left * 1000) + 1) <= 0) continue;
    ssize_t got = read(fds[0], buf, sizeof(buf));
    if (got <= 0) break;
    r.output.append(buf, (size_t)got);
  }
  if (timed_out) kill(-pid, SIGKILL);
  int st = 0;
  waitpid(pid, &st, 0);
  close(fds[0]);
  r.seconds = elapsed();
  r.status = timed_out ? -1 : (WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  return r;
}

// How many times what occurs in s (overlapping occurrences count).
inline int Count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) n++;
  return n;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

#endif  // HVDS_TEST_RUN_COMMAND_H_
