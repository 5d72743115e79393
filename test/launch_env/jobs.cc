// Jobs as other engines start them; see jobs.h.
#include "jobs.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "launch_env.h"
#include "../common/child_exec.h"
#include "../common/loopback.h"

namespace launch_test {
namespace {

// Variables by which a worker recognises an engine; cleared so that only the job's own count.
const char* const kEngineVars[] = {"RANK",
                                   "WORLD_SIZE",
                                   "LOCAL_RANK",
                                   "LOCAL_WORLD_SIZE",
                                   "MASTER_ADDR",
                                   "MASTER_PORT",
                                   "TORCHELASTIC_USE_AGENT_STORE",
                                   "TORCHELASTIC_RUN_ID",
                                   "OMPI_COMM_WORLD_RANK",
                                   "OMPI_COMM_WORLD_SIZE",
                                   "OMPI_COMM_WORLD_LOCAL_RANK",
                                   "OMPI_COMM_WORLD_LOCAL_SIZE",
                                   "SLURM_PROCID",
                                   "SLURM_STEP_ID",
                                   "SLURM_STEPID",
                                   "SLURM_NTASKS",
                                   "SLURM_STEP_NUM_TASKS",
                                   "SLURM_LOCALID",
                                   "SLURM_NODELIST",
                                   "SLURM_STEP_NODELIST",
                                   "SLURM_JOB_NODELIST",
                                   "SLURMD_NODENAME",
                                   "SLURM_JOB_ID",
                                   "SLURM_JOBID",
                                   "PMI_RANK",
                                   "PMI_SIZE",
                                   "PMI_FD",
                                   "PMI_PORT",
                                   "PMI_JOBID",
                                   "MPI_LOCALRANKID",
                                   "MPI_LOCALNRANKS",
                                   "PMIX_RANK",
                                   "PMIX_NAMESPACE",
                                   "HVDSPARSE_RANK",
                                   "HVDSPARSE_SIZE",
                                   "HOROVOD_RANK",
                                   "HOROVOD_SIZE",
                                   "HVDSPARSE_GLOO_RENDEZVOUS_ADDR",
                                   "HVDSPARSE_GLOO_RENDEZVOUS_PORT",
                                   "HOROVOD_GLOO_RENDEZVOUS_ADDR",
                                   "HOROVOD_GLOO_RENDEZVOUS_PORT",
                                   "HVDSPARSE_HOSTNAME",
                                   "HOROVOD_HOSTNAME",
                                   "HVDSPARSE_SECRET",
                                   "HOROVOD_SECRET",
                                   "HVDSPARSE_JOB_ID",
                                   "HOROVOD_JOB_ID"};

struct Proc {
  pid_t pid = -1;
  int fd = -1;  // read end of the process's stdout and stderr; -1 once at EOF
  std::string out;
  int status = -1;
  bool reaped = false;  // once waited for, the pid is no longer ours to signal
  std::chrono::steady_clock::time_point started;
  double eof_s = -1;  // seconds from its start to the end of its output
};

// Starts argv over this environment minus kEngineVars plus env; output into a pipe.
Proc Start(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  Proc p;
  p.started = std::chrono::steady_clock::now();
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return p;
  pid_t pid = fork();
  if (pid == 0) {
    for (const char* v : kEngineVars) unsetenv(v);
    hvds_test::ExecInChild(argv, env, fds[1]);
  }
  close(fds[1]);
  p.pid = pid;
  p.fd = pid > 0 ? fds[0] : -1;
  if (pid < 0) close(fds[0]);
  return p;
}

// Reads every process's output until all reach EOF or deadline; false at the deadline.
bool Collect(std::vector<Proc>& procs, std::chrono::steady_clock::time_point deadline) {
  char buf[65536];
  for (;;) {
    std::vector<pollfd> pfds;
    std::vector<Proc*> owners;
    for (auto& p : procs)
      if (p.fd >= 0) {
        pfds.push_back({p.fd, POLLIN, 0});
        owners.push_back(&p);
      }
    if (pfds.empty()) return true;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) return false;
    if (poll(pfds.data(), pfds.size(), (int)std::min<long long>(left, 1000)) <= 0) continue;
    for (size_t i = 0; i < pfds.size(); i++) {
      if (pfds[i].revents == 0) continue;
      ssize_t n = read(pfds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        owners[i]->out.append(buf, (size_t)n);
      } else {
        close(owners[i]->fd);
        owners[i]->fd = -1;
        owners[i]->eof_s = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                                         owners[i]->started)
                               .count();
      }
    }
  }
}

// Field 4 (ppid) and 22 (start time) of /proc/<pid>/stat; false when pid is gone.
bool StatOf(pid_t pid, long* ppid, unsigned long long* start) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t close_paren = text.rfind(')');
  if (close_paren == std::string::npos) return false;
  std::istringstream fields(text.substr(close_paren + 2));
  std::string f[20];
  for (auto& s : f) fields >> s;  // f[0] is field 3 (state)
  *ppid = std::atol(f[1].c_str());
  *start = std::strtoull(f[19].c_str(), nullptr, 10);
  return true;
}

int ExitCode(int st) { return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st); }

struct Child {
  pid_t pid;
  unsigned long long start;  // so a reused pid is never killed
};

std::vector<Child> ChildrenOf(pid_t parent) {
  std::vector<Child> kids;
  DIR* d = opendir("/proc");
  if (d == nullptr) return kids;
  while (dirent* e = readdir(d)) {
    pid_t pid = (pid_t)std::atol(e->d_name);
    long ppid;
    unsigned long long start;
    if (pid > 0 && StatOf(pid, &ppid, &start) && ppid == parent) kids.push_back({pid, start});
  }
  closedir(d);
  return kids;
}

// At the deadline: a launcher (mpirun, torchrun) is asked to stop its workers, then it and the
// workers it started are killed; workers this harness started are killed directly.
void KillAll(std::vector<Proc>& procs, bool launcher) {
  if (launcher) {
    std::vector<Child> kids = ChildrenOf(procs[0].pid);
    kill(procs[0].pid, SIGTERM);
    for (int i = 0; i < 30 && !procs[0].reaped; i++) {
      int st = 0;
      if (waitpid(procs[0].pid, &st, WNOHANG) == procs[0].pid) {
        procs[0].status = ExitCode(st);
        procs[0].reaped = true;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
    for (const Child& k : kids) {
      long ppid;
      unsigned long long start;
      if (StatOf(k.pid, &ppid, &start) && start == k.start) kill(k.pid, SIGKILL);
    }
  }
  for (auto& p : procs)
    if (!p.reaped) kill(p.pid, SIGKILL);  // not yet reaped: the pid is still ours
}

JobResult Finish(std::vector<Proc>& procs, int timeout_s, bool launcher) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  JobResult r;
  r.timed_out = !Collect(procs, deadline);
  if (r.timed_out) {
    KillAll(procs, launcher);
    Collect(procs, std::chrono::steady_clock::now() + std::chrono::seconds(2));  // the last words
  }
  for (auto& p : procs) {
    if (p.fd >= 0) close(p.fd);
    int st = 0;
    if (p.pid > 0 && !p.reaped && waitpid(p.pid, &st, 0) == p.pid) p.status = ExitCode(st);
    r.status.push_back(p.status);
    r.output.push_back(p.out);
    r.seconds.push_back(p.eof_s);
  }
  return r;
}

bool IsRoot() { return geteuid() == 0; }

std::vector<std::string> MpirunArgv(const JobSpec& s) {
  std::vector<std::string> argv = {HVDS_MPIRUN};
  if (IsRoot()) argv.push_back("--allow-run-as-root");
  for (const char* a : {"--oversubscribe", "--bind-to", "none", "--mca", "btl", "tcp,self"})
    argv.push_back(a);
  argv.push_back("-np");
  argv.push_back(std::to_string(s.np));
  for (const auto& e : s.env) {  // mpirun forwards only what -x names
    argv.push_back("-x");
    argv.push_back(e.substr(0, e.find('=')));
  }
  argv.insert(argv.end(), s.argv.begin(), s.argv.end());
  return argv;
}

// A Slurm job id whose derived store port is free now (other tests run alongside).
std::string SlurmJobId() {
  static int counter = 0;
  for (int i = 0; i < 100; i++) {
    std::string id = std::to_string(100000 + (getpid() % 50000) * 100 + counter++ % 100);
    if (PortFree(hvds__launch_port_for(("slurm-" + id + ".0").c_str()))) return id;
  }
  return "1";
}

std::vector<std::string> SlurmEnv(int rank, int np, const std::string& job) {
  return {"SLURM_PROCID=" + std::to_string(rank),
          "SLURM_NTASKS=" + std::to_string(np),
          "SLURM_LOCALID=" + std::to_string(rank),
          "SLURM_NODELIST=localhost",
          "SLURM_NNODES=1",
          "SLURM_JOB_ID=" + job,
          "SLURM_STEP_ID=0"};
}

// As MPICH's and Intel MPI's Hydra: no job id, so the port is given as a user would.
std::vector<std::string> PmiEnv(int rank, int np, int port) {
  return {"PMI_RANK=" + std::to_string(rank), "PMI_SIZE=" + std::to_string(np),
          "MPI_LOCALRANKID=" + std::to_string(rank), "MPI_LOCALNRANKS=" + std::to_string(np),
          "HVDSPARSE_GLOO_RENDEZVOUS_PORT=" + std::to_string(port)};
}

std::vector<std::string> TorchrunEnv(int rank, int np, int port) {
  return {"RANK=" + std::to_string(rank),
          "WORLD_SIZE=" + std::to_string(np),
          "LOCAL_RANK=" + std::to_string(rank),
          "LOCAL_WORLD_SIZE=" + std::to_string(np),
          "MASTER_ADDR=127.0.0.1",
          "MASTER_PORT=" + std::to_string(port)};
}

}  // namespace

const char* EngineName(Engine e) {
  switch (e) {
    case Engine::kMpirun:
      return "mpirun";
    case Engine::kSlurm:
      return "slurm";
    case Engine::kTorchrun:
      return "torchrun";
    case Engine::kPmi:
      return "pmi";
  }
  return "?";
}

bool JobResult::AllExitedZero() const {
  for (int s : status)
    if (s != 0) return false;
  return !status.empty();
}

std::string JobResult::AllOutput() const {
  std::string all;
  for (size_t i = 0; i < output.size(); i++)
    all += "--- process " + std::to_string(i) + " (status " + std::to_string(status[i]) +
           ") ---\n" + output[i];
  return all;
}

JobResult RunJob(const JobSpec& s) {
  std::vector<Proc> procs;
  if (s.engine == Engine::kMpirun) {
    procs.push_back(Start(MpirunArgv(s), s.env));
    return Finish(procs, s.timeout_s, true);
  }
  std::string job = SlurmJobId();
  int port = FreePort();
  for (int r = 0; r < s.np; r++) {
    std::vector<std::string> env = s.engine == Engine::kSlurm ? SlurmEnv(r, s.np, job)
                                   : s.engine == Engine::kPmi ? PmiEnv(r, s.np, port)
                                                              : TorchrunEnv(r, s.np, port);
    env.insert(env.end(), s.env.begin(), s.env.end());
    if (s.rank_env) {
      std::vector<std::string> mine = s.rank_env(r);
      env.insert(env.end(), mine.begin(), mine.end());  // later entries win
    }
    procs.push_back(Start(s.argv, env));
  }
  return Finish(procs, s.timeout_s, false);
}

JobResult RunLauncher(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                      int timeout_s) {
  std::vector<Proc> procs;
  procs.push_back(Start(argv, env));
  return Finish(procs, timeout_s, true);
}

int FreePort() { return hvds_test::FreeLoopbackPort(); }

bool PortFree(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));  // as the store server binds
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons((uint16_t)port);
  bool ok = bind(fd, (sockaddr*)&a, sizeof(a)) == 0;
  close(fd);
  return ok;
}

}  // namespace launch_test
