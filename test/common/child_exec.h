// The child's half of starting a test's job: its output into a pipe, its environment, its
// program.
#ifndef HVDS_TEST_CHILD_EXEC_H_
#define HVDS_TEST_CHILD_EXEC_H_

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace hvds_test {

// In a child just forked: stdout and stderr go to out_fd, the NAME=VALUE pairs of env join the
// environment, and argv runs (looked up in PATH when search_path); exit status 127 when it
// cannot.
[[noreturn]] inline void ExecInChild(const std::vector<std::string>& argv,
                                     const std::vector<std::string>& env, int out_fd,
                                     bool search_path = false) {
  dup2(out_fd, 1);
  dup2(out_fd, 2);
  for (const auto& e : env) putenv(strdup(e.c_str()));
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  if (search_path)
    execvp(args[0], args.data());
  else
    execv(args[0], args.data());
  _exit(127);
}

}  // namespace hvds_test

#endif  // HVDS_TEST_CHILD_EXEC_H_
