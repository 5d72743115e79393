// Process harness of the reliability tests: start a command in its own process group with its
// output on a pipe, read that output line by line as it comes (each line stamped with the wall
// clock), wait with a deadline, and find out which of the processes it started are still alive.
// Only processes this harness started (and their groups) are ever signalled.
#ifndef HVDS_TEST_RELIABILITY_HARNESS_H_
#define HVDS_TEST_RELIABILITY_HARNESS_H_

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace rel {

double WallNow();  // seconds since the epoch, as the workers print them

struct Line {
  double t;  // wall clock when the harness read it
  std::string text;
};

class Proc {
 public:
  // Starts argv with env added to this process's environment, stdout and stderr on one pipe.
  Proc(const std::vector<std::string>& argv, const std::vector<std::string>& env);
  ~Proc();  // kills the group if still running
  Proc(const Proc&) = delete;
  Proc& operator=(const Proc&) = delete;

  pid_t pid() const { return pid_; }
  // Reads what is there, waiting at most ms for the first bytes. False once the pipe closed.
  bool Pump(int ms);
  // Pumps until a line containing what appears (true) or timeout_s passes (false).
  bool WaitFor(const std::string& what, double timeout_s, int count = 1);
  // Pumps until the process exits; kills its group at the deadline. Exit code, 128 + signal,
  // or -1 when the deadline killed it.
  int Wait(double timeout_s);
  bool exited() const { return exited_; }
  double exit_time() const { return exit_time_; }
  const std::vector<Line>& lines() const { return lines_; }
  std::string output() const;
  int Count(const std::string& what) const;

 private:
  void Split();
  pid_t pid_ = -1;
  int fd_ = -1;
  bool exited_ = false;
  int status_ = -1;
  double exit_time_ = 0;
  std::string partial_;
  std::vector<Line> lines_;
};

// True when pid exists and is not a zombie, and its command line contains name (so a reused pid
// of an unrelated program does not count).
bool Alive(pid_t pid, const std::string& name);
// "PID rank=R pid=P" lines (maybe behind the launcher's "[R]<stdout>:" prefix): rank -> pid.
std::map<int, pid_t> WorkerPids(const std::vector<Line>& lines);
// Value of "key=" in text up to the next space, or "" when absent.
std::string Field(const std::string& text, const std::string& key);
// A TCP port on 127.0.0.1 that was free a moment ago.
int FreePort();
// An empty directory under /tmp, removed with its files by RemoveTree.
std::string TempDir(const std::string& tag);
void RemoveTree(const std::string& dir);
std::string ReadFile(const std::string& path);
// An environment variable as a number, or def when unset or empty.
long EnvLong(const char* name, long def);

}  // namespace rel

#endif  // HVDS_TEST_RELIABILITY_HARNESS_H_
