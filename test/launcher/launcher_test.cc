// Launcher: host parsing and assignment, flags to environment, and end-to-end runs of the built
// hvdsparse binary. Every spawned launcher has a deadline; the tests kill only pids they started.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "args.h"
#include "hosts.h"
#include "run_args.h"
#include "spawn.h"

#ifndef HVDSPARSE_BIN
#error "HVDSPARSE_BIN must name the built launcher"
#endif

namespace {

using hvds_test::Args;

// ---------------------------------------------------------------- hosts

// Slots with their host names copied out, so the host array can be freed.
struct Placed : hvds_slot_t {
  std::string host;
};

std::vector<Placed> Assign(const char* spec, int np) {
  hvds_host_t* hosts = nullptr;
  int n = 0;
  char err[256];
  EXPECT_EQ(hvds__hosts_parse(spec, &hosts, &n, err, sizeof(err)), HVDS_SUCCESS) << err;
  hvds_slot_t* slots = nullptr;
  EXPECT_EQ(hvds__hosts_assign(hosts, n, np, &slots, err, sizeof(err)), HVDS_SUCCESS) << err;
  std::vector<Placed> out(np);
  for (int r = 0; r < np; r++) {
    static_cast<hvds_slot_t&>(out[r]) = slots[r];
    out[r].host = slots[r].hostname;
    out[r].hostname = nullptr;
  }
  free(slots);
  free(hosts);
  return out;
}

TEST(Hosts, AssignmentAsHorovodrun) {
  auto s = Assign("a:2,b:2", 4);
  const char* host[] = {"a", "a", "b", "b"};
  int local[] = {0, 1, 0, 1}, cross[] = {0, 0, 1, 1};
  for (int r = 0; r < 4; r++) {
    EXPECT_EQ(s[r].host, host[r]);
    EXPECT_EQ(s[r].rank, r);
    EXPECT_EQ(s[r].size, 4);
    EXPECT_EQ(s[r].local_rank, local[r]);
    EXPECT_EQ(s[r].local_size, 2);
    EXPECT_EQ(s[r].cross_rank, cross[r]);
    EXPECT_EQ(s[r].cross_size, 2);
  }
}

TEST(Hosts, UnevenHosts) {
  // a:3,b:1 with 4 ranks: local_rank 0 exists on both hosts, 1 and 2 only on a.
  auto s = Assign("a:3, b:1", 4);
  EXPECT_EQ(s[3].host, "b");
  EXPECT_EQ(s[3].local_rank, 0);
  EXPECT_EQ(s[3].local_size, 1);
  EXPECT_EQ(s[3].cross_rank, 1);
  EXPECT_EQ(s[3].cross_size, 2);
  EXPECT_EQ(s[0].cross_size, 2);
  EXPECT_EQ(s[1].cross_size, 1);
  EXPECT_EQ(s[2].local_size, 3);
  // Fewer ranks than slots: hosts fill in order, local_size counts placed ranks.
  auto t = Assign("a:2,b:2", 3);
  EXPECT_EQ(t[2].host, "b");
  EXPECT_EQ(t[2].local_size, 1);
  EXPECT_EQ(t[0].local_size, 2);
  EXPECT_EQ(t[1].cross_size, 1);
}

TEST(Hosts, Errors) {
  hvds_host_t* hosts = nullptr;
  int n = 0;
  char err[256];
  EXPECT_EQ(hvds__hosts_parse("a:x", &hosts, &n, err, sizeof(err)), HVDS_INVALID_ARGUMENT);
  EXPECT_EQ(hvds__hosts_parse("a:0", &hosts, &n, err, sizeof(err)), HVDS_INVALID_ARGUMENT);
  EXPECT_EQ(hvds__hosts_parse(",", &hosts, &n, err, sizeof(err)), HVDS_INVALID_ARGUMENT);
  ASSERT_EQ(hvds__hosts_parse("a:1,b", &hosts, &n, err, sizeof(err)), HVDS_SUCCESS);
  EXPECT_EQ(n, 2);
  EXPECT_EQ(hosts[1].slots, 1);
  hvds_slot_t* slots = nullptr;
  EXPECT_EQ(hvds__hosts_assign(hosts, n, 3, &slots, err, sizeof(err)), HVDS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err).find("Requested more processes (3) than there are available slots (2)"),
            std::string::npos);
  free(hosts);
}

TEST(Hosts, Hostfile) {
  char path[] = "/tmp/hvds_hostfile_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const char text[] = "# cluster\nnode1 slots=4\n\n  node2   slots=2  # two GPUs\nnode3\n";
  ASSERT_EQ(write(fd, text, sizeof(text) - 1), static_cast<ssize_t>(sizeof(text) - 1));
  close(fd);
  hvds_host_t* hosts = nullptr;
  int n = 0;
  char err[256];
  ASSERT_EQ(hvds__hosts_parse_file(path, &hosts, &n, err, sizeof(err)), HVDS_SUCCESS) << err;
  ASSERT_EQ(n, 3);
  EXPECT_STREQ(hosts[0].name, "node1");
  EXPECT_EQ(hosts[0].slots, 4);
  EXPECT_STREQ(hosts[1].name, "node2");
  EXPECT_EQ(hosts[1].slots, 2);
  EXPECT_EQ(hosts[2].slots, 1);
  free(hosts);
  unlink(path);
}

TEST(Hosts, LocalNames) {
  EXPECT_TRUE(hvds__host_is_local("localhost"));
  EXPECT_TRUE(hvds__host_is_local("127.0.0.1"));
  char self[256];
  ASSERT_EQ(gethostname(self, sizeof(self)), 0);
  EXPECT_TRUE(hvds__host_is_local(self));
  EXPECT_FALSE(hvds__host_is_local("ns-worker-that-does-not-exist"));
}

// ---------------------------------------------------------------- flags and environment


TEST(RunArgs, FlagsBecomeKnobs) {
  Args w({"-np", "4", "-H", "a:2,b:2", "--fusion-threshold-mb", "32", "--cycle-time-ms=2.5",
          "--cache-capacity", "0", "--hierarchical-allreduce", "--autotune", "--no-stall-check",
          "--stall-check-warning-time-seconds", "10", "--stall-check-shutdown-time-seconds", "20",
          "--gloo-timeout-seconds", "45", "--network-interfaces", "eth1,eth2", "--timeline-filename",
          "/tmp/tl.json", "--timeline-mark-cycles", "--log-level", "DEBUG", "--start-timeout", "7",
          "-x", "FOO", "-x", "BAR=baz", "--verbose", "python", "train.py", "--lr", "0.1"});
  hvds_run_args_t a;
  ASSERT_EQ(w.Parse(&a), HVDS_SUCCESS) << w.err;
  EXPECT_EQ(a.np, 4);
  EXPECT_STREQ(a.hosts, "a:2,b:2");
  EXPECT_EQ(a.verbose, 1);
  EXPECT_DOUBLE_EQ(a.start_timeout, 7.0);
  EXPECT_STREQ(hvds__env_list_get(&a.knobs, "FUSION_THRESHOLD"), "33554432");
  EXPECT_STREQ(hvds__env_list_get(&a.knobs, "CYCLE_TIME"), "2.5");
  EXPECT_STREQ(hvds__env_list_get(&a.knobs, "CACHE_CAPACITY"), "0");
  EXPECT_STREQ(hvds__env_list_get(&a.knobs, "HIERARCHICAL_ALLREDUCE"), "1");
  EXPECT_STREQ(hvds__env_list_get(&a.knobs, "AUTOTUNE"), "1");
  EXPECT_STREQ(hvds__env_list_get(&a.knobs, "STALL_CHECK_DISABLE"), "1");
  EXPECT_STREQ(hvds__env_list_get(&a.knobs, "STALL_CHECK_TIME_SECONDS"), "10");
  EXPECT_STREQ(hvds__env_list_get(&a.knobs, "STALL_SHUTDOWN_TIME_SECONDS"), "20");
  EXPECT_STREQ(hvds__env_list_get(&a.knobs, "GLOO_TIMEOUT_SECONDS"), "45");
  EXPECT_STREQ(hvds__env_list_get(&a.knobs, "GLOO_IFACE"), "eth1");
  EXPECT_STREQ(hvds__env_list_get(&a.knobs, "TIMELINE"), "/tmp/tl.json");
  EXPECT_STREQ(hvds__env_list_get(&a.knobs, "TIMELINE_MARK_CYCLES"), "1");
  EXPECT_STREQ(hvds__env_list_get(&a.knobs, "LOG_LEVEL"), "DEBUG");
  EXPECT_STREQ(hvds__env_list_get(&a.knobs, "START_TIMEOUT"), "7");
  ASSERT_EQ(a.xvars.n, 2);
  EXPECT_EQ(hvds__env_list_get(&a.xvars, "FOO"), nullptr);
  EXPECT_STREQ(hvds__env_list_get(&a.xvars, "BAR"), "baz");
  // Parsing stops at the command; its own flags are untouched.
  ASSERT_EQ(a.ncommand, 4);
  EXPECT_STREQ(a.command[0], "python");
  EXPECT_STREQ(a.command[2], "--lr");
  hvds__run_args_free(&a);
}

TEST(RunArgs, LastFlagWinsAndErrors) {
  Args w({"-np", "2", "--hierarchical-allreduce", "--no-hierarchical-allreduce", "true"});
  hvds_run_args_t a;
  ASSERT_EQ(w.Parse(&a), HVDS_SUCCESS);
  EXPECT_STREQ(hvds__env_list_get(&a.knobs, "HIERARCHICAL_ALLREDUCE"), "0");
  hvds__run_args_free(&a);
  Args bad1({"-np", "2", "--bogus", "true"});
  EXPECT_EQ(bad1.Parse(&a), HVDS_INVALID_ARGUMENT);
  Args bad2({"-np", "2", "--fusion-threshold-mb", "lots", "true"});
  EXPECT_EQ(bad2.Parse(&a), HVDS_INVALID_ARGUMENT);
  Args bad3({"-np", "2"});
  EXPECT_EQ(bad3.Parse(&a), HVDS_INVALID_ARGUMENT);
  Args bad4({"-np", "2", "--log-level", "LOUD", "true"});
  EXPECT_EQ(bad4.Parse(&a), HVDS_INVALID_ARGUMENT);
  Args bad5({"--cycle-time-ms"});
  EXPECT_EQ(bad5.Parse(&a), HVDS_INVALID_ARGUMENT);
}

struct Job {
  explicit Job(std::vector<std::string> words, int np) : args(std::move(words)) {
    EXPECT_EQ(args.Parse(&a), HVDS_SUCCESS) << args.err;
    char err[256];
    EXPECT_EQ(hvds__hosts_parse(a.hosts ? a.hosts : "localhost:8", &hosts, &nhosts, err,
                                sizeof(err)),
              HVDS_SUCCESS);
    EXPECT_EQ(hvds__hosts_assign(hosts, nhosts, np, &slots, err, sizeof(err)), HVDS_SUCCESS);
    memset(&job, 0, sizeof(job));
    job.args = &a;
    job.slots = slots;
    job.np = np;
    EXPECT_EQ(hvds__job_make_ids(&job), HVDS_SUCCESS);
    snprintf(job.store_addr, sizeof(job.store_addr), "10.0.0.1");
    job.store_port = 4242;
    snprintf(job.cwd, sizeof(job.cwd), "/srv/it's here");
  }
  ~Job() {
    hvds__run_args_free(&a);
    free(hosts);
    free(slots);
  }
  Args args;
  hvds_run_args_t a;
  hvds_host_t* hosts = nullptr;
  int nhosts = 0;
  hvds_slot_t* slots = nullptr;
  hvds_job_t job;
};

TEST(Spawn, WorkerEnvironment) {
  Job j({"-np", "4", "-H", "a:2,b:2", "--fusion-threshold-mb", "1", "-x", "X1=v1", "-x",
         "HOROVOD_RANK=99", "--horovod-alias", "cmd"},
        4);
  EXPECT_EQ(strlen(j.job.secret), 64u);
  hvds_env_list_t env;
  ASSERT_EQ(hvds__worker_env(&j.job, 3, &env), HVDS_SUCCESS);
  for (const char* p : {"HVDSPARSE_", "HOROVOD_"}) {
    auto get = [&](const char* s) {
      const char* v = hvds__env_list_get(&env, (std::string(p) + s).c_str());
      return std::string(v ? v : "<unset>");
    };
    EXPECT_EQ(get("RANK"), "3");  // the job's identity wins over -x
    EXPECT_EQ(get("SIZE"), "4");
    EXPECT_EQ(get("LOCAL_RANK"), "1");
    EXPECT_EQ(get("LOCAL_SIZE"), "2");
    EXPECT_EQ(get("CROSS_RANK"), "1");
    EXPECT_EQ(get("CROSS_SIZE"), "2");
    EXPECT_EQ(get("HOSTNAME"), "b");
    EXPECT_EQ(get("GLOO_RENDEZVOUS_ADDR"), "10.0.0.1");
    EXPECT_EQ(get("GLOO_RENDEZVOUS_PORT"), "4242");
    EXPECT_EQ(get("SECRET"), j.job.secret);
    EXPECT_EQ(get("JOB_ID"), j.job.job_id);
    EXPECT_EQ(get("FUSION_THRESHOLD"), "1048576");
    EXPECT_EQ(get("HOROVOD_ALIAS"), "1");
  }
  EXPECT_STREQ(hvds__env_list_get(&env, "PYTHONUNBUFFERED"), "1");
  EXPECT_STREQ(hvds__env_list_get(&env, "X1"), "v1");
  hvds__env_list_free(&env);
}

TEST(Spawn, KeepFreedMemorySetsWorkersMalloc) {
  auto env_of = [](std::vector<std::string> words, const char* name) {
    Job j(words, 2);
    hvds_env_list_t env;
    EXPECT_EQ(hvds__worker_env(&j.job, 1, &env), HVDS_SUCCESS);
    const char* v = hvds__env_list_get(&env, name);
    std::string out = v ? v : "<unset>";
    hvds__env_list_free(&env);
    return out;
  };
  EXPECT_EQ(env_of({"-np", "2", "cmd"}, "MALLOC_MMAP_MAX_"), "<unset>");
  EXPECT_EQ(env_of({"-np", "2", "--keep-freed-memory", "cmd"}, "MALLOC_MMAP_MAX_"), "0");
  EXPECT_EQ(env_of({"-np", "2", "--keep-freed-memory", "cmd"}, "MALLOC_TRIM_THRESHOLD_"),
            "17179869184");
  // The user's own value wins: from -x, or from the launcher's environment.
  EXPECT_EQ(env_of({"-np", "2", "--keep-freed-memory", "-x", "MALLOC_MMAP_MAX_=8", "cmd"},
                   "MALLOC_MMAP_MAX_"),
            "8");
  setenv("MALLOC_TRIM_THRESHOLD_", "1048576", 1);
  EXPECT_EQ(env_of({"-np", "2", "--keep-freed-memory", "cmd"}, "MALLOC_TRIM_THRESHOLD_"),
            "1048576");
  unsetenv("MALLOC_TRIM_THRESHOLD_");
}

TEST(Spawn, RemoteCommandLines) {
  {
    Job j({"-np", "2", "-H", "ns1:1,ns2:1", "--rsh", "ip netns exec", "python", "x y.py"}, 2);
    hvds_env_list_t env;
    ASSERT_EQ(hvds__worker_env(&j.job, 1, &env), HVDS_SUCCESS);
    char** argv = nullptr;
    ASSERT_EQ(hvds__worker_argv(&j.job, 1, &env, &argv), HVDS_SUCCESS);
    std::vector<std::string> v;
    for (char** p = argv; *p; p++) v.push_back(*p);
    ASSERT_GE(v.size(), 7u);
    EXPECT_EQ(v[0], "ip");
    EXPECT_EQ(v[1], "netns");
    EXPECT_EQ(v[2], "exec");
    EXPECT_EQ(v[3], "ns2");
    EXPECT_EQ(v[4], "env");
    EXPECT_EQ(v[v.size() - 2], "python");
    EXPECT_EQ(v.back(), "x y.py");
    bool has_rank = false;
    for (auto& s : v) has_rank |= s == "HVDSPARSE_RANK=1";
    EXPECT_TRUE(has_rank);
    hvds__argv_free(argv);
    hvds__env_list_free(&env);
  }
  {
    Job j({"-np", "1", "-H", "remote-host:1", "-p", "2222", "-i", "/k/id", "echo", "it's"}, 1);
    hvds_env_list_t env;
    ASSERT_EQ(hvds__worker_env(&j.job, 0, &env), HVDS_SUCCESS);
    char** argv = nullptr;
    ASSERT_EQ(hvds__worker_argv(&j.job, 0, &env, &argv), HVDS_SUCCESS);
    std::vector<std::string> v;
    for (char** p = argv; *p; p++) v.push_back(*p);
    std::vector<std::string> head = {"ssh", "-o", "PasswordAuthentication=no", "-o",
                                     "StrictHostKeyChecking=no", "-p", "2222", "-i", "/k/id",
                                     "remote-host"};
    ASSERT_EQ(v.size(), head.size() + 1);
    for (size_t i = 0; i < head.size(); i++) EXPECT_EQ(v[i], head[i]);
    const std::string& line = v.back();
    EXPECT_EQ(line.rfind("cd '/srv/it'\\''s here' >/dev/null 2>&1; env ", 0), 0u) << line;
    EXPECT_NE(line.find(" HVDSPARSE_RANK='0'"), std::string::npos);
    EXPECT_NE(line.find(" 'echo' 'it'\\''s'"), std::string::npos) << line;
    hvds__argv_free(argv);
    hvds__env_list_free(&env);
  }
}

TEST(Spawn, SshWorkersGetTheLaunchersEnvironmentButTheDenyList) {
  setenv("HVDS_T_FORWARDED", "a b", 1);
  setenv("SSH_AUTH_SOCK", "/tmp/agent.sock", 1);
  setenv("CUDA_VISIBLE_DEVICES", "3", 1);
  setenv("OLDPWD", "/somewhere", 1);
  setenv("HVDSPARSE_SECRET", "launchers-own", 1);
  Job j({"-np", "1", "-H", "remote-host:1", "env"}, 1);
  hvds_env_list_t env;
  ASSERT_EQ(hvds__worker_env(&j.job, 0, &env), HVDS_SUCCESS);
  char** argv = nullptr;
  ASSERT_EQ(hvds__worker_argv(&j.job, 0, &env, &argv), HVDS_SUCCESS);
  std::string line;
  for (char** p = argv; *p; p++) line = *p;  // the remote command line is the last word
  EXPECT_NE(line.find(" 'HVDS_T_FORWARDED=a b'"), std::string::npos) << line;
  EXPECT_NE(line.find(" 'PATH="), std::string::npos) << line;
  for (const char* gone : {"SSH_AUTH_SOCK", "CUDA_VISIBLE_DEVICES", "OLDPWD", "launchers-own"})
    EXPECT_EQ(line.find(gone), std::string::npos) << gone << " travelled: " << line;
  EXPECT_NE(line.find(std::string(" HVDSPARSE_SECRET='") + j.job.secret + "'"), std::string::npos);
  hvds__argv_free(argv);
  hvds__env_list_free(&env);
  for (const char* v : {"HVDS_T_FORWARDED", "SSH_AUTH_SOCK", "CUDA_VISIBLE_DEVICES", "OLDPWD",
                        "HVDSPARSE_SECRET"})
    unsetenv(v);
}

// ---------------------------------------------------------------- end to end

struct Result {
  int status = -1;  // exit code, or -signal
  std::string out, err;
};

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string TempDir() {
  char dir[] = "/tmp/hvds_launcher_test_XXXXXX";
  EXPECT_NE(mkdtemp(dir), nullptr);
  return dir;
}

// Starts the launcher with stdout and stderr going to files in dir.
pid_t StartLauncher(const std::vector<std::string>& args, const std::string& dir,
                    const char* bin = HVDSPARSE_BIN) {
  std::vector<std::string> words = {bin};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(&w[0]);
  argv.push_back(nullptr);
  std::string out = dir + "/launcher.out", err = dir + "/launcher.err";
  pid_t pid = fork();
  if (pid == 0) {
    int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(o, 1);
    dup2(e, 2);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

// Waits for the launcher up to timeout_s; kills it (only it) past the deadline.
Result Finish(pid_t pid, const std::string& dir, int timeout_s) {
  Result r;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  int st = 0;
  for (;;) {
    pid_t w = waitpid(pid, &st, WNOHANG);
    if (w == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "launcher did not finish within " << timeout_s << " s";
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
  r.out = ReadFile(dir + "/launcher.out");
  r.err = ReadFile(dir + "/launcher.err");
  return r;
}

Result RunLauncher(const std::vector<std::string>& args, int timeout_s = 30) {
  std::string dir = TempDir();
  return Finish(StartLauncher(args, dir), dir, timeout_s);
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// True once pid no longer names a live process (a zombie awaiting its reaper counts as gone).
bool Gone(pid_t pid) {
  if (kill(pid, 0) != 0) return true;
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
}

bool GoneWithin(pid_t pid, int ms) {
  for (int t = 0; t < ms; t += 20) {
    if (Gone(pid)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Gone(pid);
}

// Reads the pids the workers wrote; waits until count are there.
std::vector<pid_t> WaitPids(const std::string& dir, int count, int timeout_ms) {
  std::vector<pid_t> pids;
  for (int t = 0; t < timeout_ms; t += 20) {
    pids.clear();
    std::istringstream in(ReadFile(dir + "/pids"));
    pid_t p;
    while (in >> p) pids.push_back(p);
    if (static_cast<int>(pids.size()) >= count) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pids;
}

TEST(EndToEnd, PrefixedOutput) {
  Result r = RunLauncher({"run", "-np", "3", "sh", "-c",
                  "echo $HVDSPARSE_RANK; echo err$HOROVOD_RANK >&2; printf tail"});
  EXPECT_EQ(r.status, 0) << r.err;
  for (int rank = 0; rank < 3; rank++) {
    std::string p = "[" + std::to_string(rank) + "]";
    EXPECT_NE(r.out.find(p + "<stdout>:" + std::to_string(rank) + "\n"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find(p + "<stdout>:tail\n"), std::string::npos) << r.out;
    EXPECT_NE(r.err.find(p + "<stderr>:err" + std::to_string(rank) + "\n"), std::string::npos)
        << r.err;
  }
}

TEST(EndToEnd, KnobsReachWorkers) {
  Result r = RunLauncher({"run", "-np", "2", "--fusion-threshold-mb", "2", "-x", "HVDS_T_VAR=ok", "sh",
                  "-c",
                  "echo $HOROVOD_FUSION_THRESHOLD $HVDS_T_VAR $HVDSPARSE_LOCAL_SIZE "
                  "$PYTHONUNBUFFERED ${#HVDSPARSE_SECRET} $HVDSPARSE_GLOO_RENDEZVOUS_ADDR"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("[1]<stdout>:2097152 ok 2 1 64 127.0.0.1\n"), std::string::npos) << r.out;
}

TEST(EndToEnd, FailureKillsSiblings) {
  std::string dir = TempDir();
  // Rank 0 records its pid and sleeps; rank 1 waits for that, then fails with 3.
  std::string script = "if [ $HVDSPARSE_RANK = 0 ]; then echo $$ >> " + dir +
                       "/pids; exec sleep 1000; fi; while [ ! -s " + dir +
                       "/pids ]; do sleep 0.05; done; exit 3";
  pid_t launcher = StartLauncher({"run", "-np", "2", "sh", "-c", script}, dir);
  Result r = Finish(launcher, dir, 30);
  std::vector<pid_t> pids = WaitPids(dir, 1, 1000);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("Process 1 exit with status code 3."), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Terminating remaining workers after failure of Process 1."),
            std::string::npos);
  EXPECT_NE(r.err.find("The first process to do so was:\nProcess name: 1\nExit code: 3"),
            std::string::npos)
      << r.err;
  ASSERT_EQ(pids.size(), 1u);
  EXPECT_TRUE(GoneWithin(pids[0], 2000)) << "sibling " << pids[0] << " survived";
  for (pid_t p : pids)
    if (!Gone(p)) kill(p, SIGKILL);
}

// Horovod's sentence under its alias (horovodrun, --horovod-alias), for what scans job logs for it.
TEST(EndToEnd, FailureSentenceNamesHorovodUnderItsAlias) {
  for (bool alias : {false, true}) {
    std::vector<std::string> args = {"run", "-np", "2", "sh", "-c", "exit $HVDSPARSE_RANK"};
    if (alias) args.insert(args.begin() + 1, "--horovod-alias");
    Result r = RunLauncher(args);
    EXPECT_EQ(r.status, 1);
    std::string want = std::string(alias ? "Horovod" : "hvdsparse") +
                       " detected that one or more processes exited with non-zero status, thus "
                       "causing the job to be terminated. The first process to do so was:\n"
                       "Process name: 1\nExit code: 1";
    EXPECT_NE(r.err.find(want), std::string::npos) << r.err;
  }
}

TEST(EndToEnd, SigtermLeavesNothingBehind) {
  std::string dir = TempDir();
  // Each worker starts a background grandchild and then sleeps itself; all record their pids.
  std::string script = "sleep 1000 & echo $! >> " + dir + "/pids; echo $$ >> " + dir +
                       "/pids; exec sleep 1000";
  pid_t launcher = StartLauncher({"run", "-np", "2", "sh", "-c", script}, dir);
  std::vector<pid_t> pids = WaitPids(dir, 4, 10000);
  ASSERT_EQ(pids.size(), 4u);
  kill(launcher, SIGTERM);
  Result r = Finish(launcher, dir, 20);
  EXPECT_EQ(r.status, 128 + SIGTERM) << r.err;
  for (pid_t p : pids) {
    EXPECT_TRUE(GoneWithin(p, 2000)) << "pid " << p << " survived";
    if (!Gone(p)) kill(p, SIGKILL);
  }
}

TEST(EndToEnd, OutputFilename) {
  std::string dir = TempDir();
  Result r = RunLauncher({"run", "-np", "2", "--output-filename", dir + "/logs", "sh", "-c",
                  "echo out$HVDSPARSE_RANK; echo err$HVDSPARSE_RANK >&2"});
  EXPECT_EQ(r.status, 0) << r.err;
  for (int rank = 0; rank < 2; rank++) {
    std::string base = dir + "/logs/rank." + std::to_string(rank);
    EXPECT_EQ(ReadFile(base + "/stdout"), "out" + std::to_string(rank) + "\n");
    EXPECT_EQ(ReadFile(base + "/stderr"), "err" + std::to_string(rank) + "\n");
  }
  // The console still gets the prefixed lines.
  EXPECT_NE(r.out.find("[1]<stdout>:out1"), std::string::npos);
}

TEST(EndToEnd, BadCommandLineAndCheckBuild) {
  Result r = RunLauncher({"run", "-np", "2"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("no command"), std::string::npos) << r.err;
  r = RunLauncher({"run", "-np", "3", "-H", "localhost:2", "true"});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("Requested more processes"), std::string::npos) << r.err;
  r = RunLauncher({"run", "-np", "1", "/nonexistent/program"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("Exit code: 127"), std::string::npos) << r.err;
  r = RunLauncher({"--version"});
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("0.1.0"), std::string::npos);
  r = RunLauncher({"check-build"}, 150);  // two framework imports of at most 60 s each
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("Available Controllers:\n    [ ] MPI\n    [X] Gloo"), std::string::npos)
      << r.out;
}

TEST(EndToEnd, HorovodrunTakesHorovodFlagsAndConfigFileWithTheAliasOn) {
  std::string dir = TempDir();
  std::ofstream(dir + "/config.yaml") << "params:\n  fusion_threshold_mb: 4\n  cycle_time_ms: 3\n"
                                         "library_options:\n  num_nccl_streams: 2\n";
  pid_t pid = StartLauncher({"-np", "2", "--mpi", "--tcp", "--cycle-time-ms", "7",
                             "--config-file", dir + "/config.yaml", "--network-interface", "lo",
                             "sh", "-c",
                             "echo $HOROVOD_FUSION_THRESHOLD $HOROVOD_CYCLE_TIME "
                             "$HVDSPARSE_GLOO_IFACE $HVDSPARSE_HOROVOD_ALIAS"},
                            dir, HOROVODRUN_BIN);
  Result r = Finish(pid, dir, 30);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("[1]<stdout>:4194304 7 lo 1\n"), std::string::npos) << r.out;
  for (const char* warned : {"--mpi has no effect", "--tcp has no effect",
                             "config file key library_options.num_nccl_streams has no effect"})
    EXPECT_NE(r.err.find(warned), std::string::npos) << warned << "\n" << r.err;
  // The elastic flags start an elastic job (test/python/elastic runs real ones).
  r = Finish(StartLauncher({"-np", "2", "--min-np", "1", "true"}, dir, HOROVODRUN_BIN), dir, 30);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("elastic: membership 1, 2 workers (start)"), std::string::npos) << r.err;
}

TEST(EndToEnd, ACommandThatCannotRunSaysWhy) {
  std::string dir = TempDir();
  std::ofstream(dir + "/t.py") << "print(1)\n";  // not executable
  Result r = RunLauncher({"run", "-np", "1", dir + "/t.py"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("cannot execute " + dir + "/t.py: permission denied"), std::string::npos)
      << r.err;
  r = RunLauncher({"run", "-np", "1", "hvds-no-such-command"});
  EXPECT_NE(r.err.find("cannot execute hvds-no-such-command: not found in PATH"),
            std::string::npos)
      << r.err;
}

// Two ranks fail while the launcher is stopped, rank 1 well before rank 0: seen in one wake-up,
// the first to exit is still the one named. The scheduler's clock of each CPU drifts from the
// others' (steal and interrupt time), so the ranks also run pinned to two different CPUs, both
// ways round.
TEST(EndToEnd, TheFirstFailureNamedIsTheFirstToExit) {
  if (access("/proc/self/sched", R_OK) != 0) GTEST_SKIP() << "the kernel shows no exit times";
  std::vector<std::string> pins = {""};
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0 && CPU_ISSET(0, &allowed) &&
      CPU_ISSET(1, &allowed) && system("taskset -c 0 true 2>/dev/null") == 0)
    pins = {"", "0,1", "1,0"};
  for (const std::string& pin : pins) {
    SCOPED_TRACE("ranks 0,1 on CPUs " + (pin.empty() ? std::string("any") : pin));
    std::string dir = TempDir();
    std::string body = "echo $$ >> " + dir + "/pids; while [ ! -e " + dir +
                       "/go ]; do sleep 0.02; done; "
                       "if [ $HVDSPARSE_RANK = 0 ]; then sleep 0.5; exit 5; fi; exit 3";
    std::string script = body;
    if (!pin.empty())
      script = "if [ $HVDSPARSE_RANK = 0 ]; then c=" + pin.substr(0, 1) +
               "; else c=" + pin.substr(2, 1) + "; fi; exec taskset -c $c sh -c '" + body + "'";
    pid_t launcher = StartLauncher({"run", "-np", "2", "sh", "-c", script}, dir);
    std::vector<pid_t> pids = WaitPids(dir, 2, 20000);
    ASSERT_EQ(pids.size(), 2u);
    kill(launcher, SIGSTOP);
    std::ofstream(dir + "/go") << "";
    bool both = GoneWithin(pids[0], 10000) && GoneWithin(pids[1], 10000);
    kill(launcher, SIGCONT);
    Result r = Finish(launcher, dir, 30);
    ASSERT_TRUE(both) << "the workers did not exit";
    EXPECT_NE(r.err.find("The first process to do so was:\nProcess name: 1\nExit code: 3"),
              std::string::npos)
        << r.err;
  }
}

// Rank 2 never gets to init: the others give up at the start timeout, the launcher names it and
// ends the job at once (nobody is left to explain anything), sleeping rank 2 included.
TEST(EndToEnd, ARankThatNeverStartsEndsTheJobWithinTheStartTimeout) {
  std::string dir = TempDir();
  std::string script = "if [ $HVDSPARSE_RANK = 2 ]; then echo $$ >> " + dir +
                       "/pids; exec sleep 600; fi; exec \"$0\" basics";
  auto t0 = std::chrono::steady_clock::now();
  pid_t launcher = StartLauncher(
      {"run", "-np", "3", "--start-timeout", "5", "sh", "-c", script, HVDS_MP_WORKER}, dir);
  Result r = Finish(launcher, dir, 60);
  double took = Seconds(t0);
  std::vector<pid_t> pids = WaitPids(dir, 1, 1000);
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_LT(took, 5 + 4.0) << r.out << r.err;
  EXPECT_NE(r.err.find("not every rank reached rendezvous within the start timeout"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("Rank 2 never reached rendezvous"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("rank 2 never published its address"), std::string::npos) << r.err;
  ASSERT_EQ(pids.size(), 1u);
  EXPECT_TRUE(GoneWithin(pids[0], 2000)) << "rank 2 (pid " << pids[0] << ") survived";
  for (pid_t p : pids)
    if (!Gone(p)) kill(p, SIGKILL);
}

}  // namespace
