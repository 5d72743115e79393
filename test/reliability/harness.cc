#include "harness.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "../common/child_exec.h"
#include "../common/loopback.h"

namespace rel {

double WallNow() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

Proc::Proc(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return;
  pid_ = fork();
  if (pid_ == 0) {
    setpgid(0, 0);
    hvds_test::ExecInChild(argv, env, fds[1], /*search_path=*/true);
  }
  if (pid_ > 0) setpgid(pid_, pid_);
  close(fds[1]);
  fd_ = fds[0];
}

Proc::~Proc() {
  if (pid_ > 0 && !exited_) {
    kill(-pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (fd_ >= 0) close(fd_);
}

void Proc::Split() {
  size_t nl;
  double t = WallNow();
  while ((nl = partial_.find('\n')) != std::string::npos) {
    lines_.push_back({t, partial_.substr(0, nl)});
    partial_.erase(0, nl + 1);
  }
}

bool Proc::Pump(int ms) {
  if (fd_ < 0) return false;
  struct pollfd p = {fd_, POLLIN, 0};
  char buf[65536];
  int timeout = ms;
  for (;;) {
    int n = poll(&p, 1, timeout);
    if (n <= 0) return true;
    ssize_t got = read(fd_, buf, sizeof(buf));
    if (got <= 0) {
      if (!partial_.empty()) partial_ += '\n';
      Split();
      close(fd_);
      fd_ = -1;
      return false;
    }
    partial_.append(buf, (size_t)got);
    Split();
    timeout = 0;
  }
}

bool Proc::WaitFor(const std::string& what, double timeout_s, int count) {
  double deadline = WallNow() + timeout_s;
  while (Count(what) < count) {
    double left = deadline - WallNow();
    if (left <= 0) return false;
    if (!Pump((int)(left * 1000) + 1) && Count(what) < count) return false;
  }
  return true;
}

int Proc::Wait(double timeout_s) {
  if (exited_) return status_;
  double deadline = WallNow() + timeout_s;
  bool killed = false;
  for (;;) {
    int st = 0;
    pid_t w = waitpid(pid_, &st, WNOHANG);
    if (w == pid_) {
      exited_ = true;
      exit_time_ = WallNow();
      status_ = killed ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      // What the group's other processes still write ends with them; take what is there.
      Pump(0);
      return status_;
    }
    if (!killed && WallNow() > deadline) {
      kill(-pid_, SIGKILL);
      killed = true;
    }
    Pump(fd_ >= 0 ? 50 : 0);
    if (fd_ < 0) usleep(20000);
  }
}

std::string Proc::output() const {
  std::string s;
  for (const auto& l : lines_) s += l.text + "\n";
  return s + partial_;
}

int Proc::Count(const std::string& what) const {
  int n = 0;
  for (const auto& l : lines_) n += l.text.find(what) != std::string::npos;
  return n;
}

bool Alive(pid_t pid, const std::string& name) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  std::string stat = ReadFile(path);
  if (stat.empty()) return false;
  size_t close_paren = stat.rfind(')');
  if (close_paren != std::string::npos && close_paren + 2 < stat.size() &&
      stat[close_paren + 2] == 'Z')
    return false;
  snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
  std::string cmd = ReadFile(path);
  for (auto& c : cmd)
    if (c == '\0') c = ' ';
  return cmd.find(name) != std::string::npos;
}

std::string Field(const std::string& text, const std::string& key) {
  size_t p = text.find(key + "=");
  if (p == std::string::npos) return "";
  p += key.size() + 1;
  size_t e = text.find(' ', p);
  return text.substr(p, e == std::string::npos ? std::string::npos : e - p);
}

std::map<int, pid_t> WorkerPids(const std::vector<Line>& lines) {
  std::map<int, pid_t> pids;
  for (const auto& l : lines) {
    size_t p = l.text.find("PID rank=");
    if (p == std::string::npos) continue;
    std::string rest = l.text.substr(p);
    std::string r = Field(rest, "rank"), pid = Field(rest, "pid");
    if (!r.empty() && r != "?" && !pid.empty()) pids[std::atoi(r.c_str())] = std::atoi(pid.c_str());
  }
  return pids;
}

int FreePort() { return hvds_test::FreeLoopbackPort(); }

std::string TempDir(const std::string& tag) {
  std::string t = "/tmp/hvds_rel_" + tag + "_XXXXXX";
  std::vector<char> buf(t.begin(), t.end());
  buf.push_back('\0');
  return mkdtemp(buf.data()) ? std::string(buf.data()) : std::string();
}

void RemoveTree(const std::string& dir) {
  if (dir.empty()) return;
  DIR* d = opendir(dir.c_str());
  struct dirent* e;
  while (d && (e = readdir(d)) != nullptr)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
      unlink((dir + "/" + e->d_name).c_str());
  if (d) closedir(d);
  rmdir(dir.c_str());
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

long EnvLong(const char* name, long def) {
  const char* v = getenv(name);
  return v && *v ? std::atol(v) : def;
}

}  // namespace rel
