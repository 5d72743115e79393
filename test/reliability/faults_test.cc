// Fault injection at np 4: one random rank of a job running the mixed workload is killed
// (SIGKILL) or stopped (SIGSTOP) at a random moment. Every surviving rank must fail within the
// collective timeout with an error naming that rank, the launcher must exit non-zero, and none
// of the processes the test started may outlive it.
//
// HVDS_FAULT_RUNS (default 6) sets the number of runs, HVDS_FAULT_SEED (default 1) the random
// sequence; HVDS_FAULT_REPORT names a file that gets one Markdown table row per run and a summary
// (docs/reliability.md records a 100-run acceptance run made that way).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>

#include "harness.h"

namespace {

constexpr int kNp = 4;
constexpr double kTimeoutS = 3;     // HVDSPARSE_GLOO_TIMEOUT_SECONDS of the faulted jobs
constexpr double kDetectSlackS = 2;  // scheduling on a loaded machine, plus one cycle
// Survivors settle (2 s), SIGTERM, then SIGKILL after a 5 s grace: the launcher's own budget.
constexpr double kLauncherEndS = kTimeoutS + 2 + 5 + 5;

struct Outcome {
  int run = 0, victim = -1, sig = 0, delay_ms = 0;
  int launcher_rc = 0;
  int survivors_failed = 0, survivors_naming = 0;
  double detect_max = -1;  // seconds from the signal until the last survivor failed
  double launcher_end = -1;
  int leftovers = 0;
  std::string message;     // one survivor's error, as seen
  std::string problems;
};

const char* SigName(int sig) { return sig == SIGKILL ? "SIGKILL" : "SIGSTOP"; }

// The error of rank r's FAILED line, "" when it printed none; t gets its time stamp.
std::string FailureOf(const rel::Proc& job, int r, double* t) {
  std::string key = "FAILED rank=" + std::to_string(r) + " ";
  for (const auto& l : job.lines()) {
    size_t p = l.text.find(key);
    if (p == std::string::npos) continue;
    std::string rest = l.text.substr(p);
    *t = std::atof(rel::Field(rest, "t").c_str());
    size_t colon = rest.find(": ");
    return colon == std::string::npos ? rest : rest.substr(colon + 2);
  }
  return "";
}

// Checks what the survivors printed and what is left; fills the outcome's figures.
void Judge(const rel::Proc& job, const std::map<int, pid_t>& pids, double t_sig, Outcome* o) {
  std::regex names_victim("\\brank " + std::to_string(o->victim) + "\\b");
  std::ostringstream problems;
  for (int r = 0; r < kNp; r++) {
    if (r == o->victim) continue;
    double t = 0;
    std::string msg = FailureOf(job, r, &t);
    if (msg.empty()) {
      problems << "rank " << r << " printed no failure; ";
      continue;
    }
    o->survivors_failed++;
    if (std::regex_search(msg, names_victim))
      o->survivors_naming++;
    else
      problems << "rank " << r << "'s error does not name rank " << o->victim << "; ";
    o->detect_max = std::max(o->detect_max, t - t_sig);
    if (o->message.empty() || msg.size() < o->message.size()) o->message = msg;
  }
  if (o->launcher_rc == 0 || o->launcher_rc == -1)
    problems << "launcher exit " << o->launcher_rc << "; ";
  if (o->detect_max > kTimeoutS + kDetectSlackS)
    problems << "detected after " << o->detect_max << " s; ";
  if (o->launcher_end > kLauncherEndS) problems << "launcher ended after " << o->launcher_end << " s; ";
  for (const auto& [rank, pid] : pids) {
    if (!rel::Alive(pid, "rel_worker")) continue;
    o->leftovers++;
    problems << "rank " << rank << " (pid " << pid << ") still running; ";
    kill(pid, SIGKILL);  // ours: the test started it
  }
  o->problems = problems.str();
}

Outcome RunOnce(int run, int victim, int sig, int delay_ms) {
  Outcome o;
  o.run = run;
  o.victim = victim;
  o.sig = sig;
  o.delay_ms = delay_ms;
  rel::Proc job({HVDS_LAUNCHER, "run", "-np", std::to_string(kNp), HVDS_REL_WORKER, "mixed", "0"},
                {"HVDSPARSE_GLOO_TIMEOUT_SECONDS=" + std::to_string((int)kTimeoutS)});
  if (!job.WaitFor("READY rank=", 90, kNp)) {
    o.problems = "the job never got ready: " + job.output();
    return o;
  }
  std::map<int, pid_t> pids = rel::WorkerPids(job.lines());
  if (pids.size() != (size_t)kNp || pids.count(victim) == 0) {
    o.problems = "worker pids not seen";
    return o;
  }
  double until = rel::WallNow() + delay_ms / 1000.0;
  while (rel::WallNow() < until) job.Pump((int)((until - rel::WallNow()) * 1000) + 1);
  double t_sig = rel::WallNow();
  kill(pids[victim], sig);
  o.launcher_rc = job.Wait(60);
  o.launcher_end = job.exit_time() - t_sig;
  Judge(job, pids, t_sig, &o);
  if (!o.problems.empty()) o.problems += "\n--- output ---\n" + job.output();
  return o;
}

std::string Escape(std::string s) {
  for (auto& c : s)
    if (c == '|' || c == '\n') c = c == '|' ? '/' : ' ';
  return s;
}

void Report(const std::vector<Outcome>& all, long seed) {
  const char* path = getenv("HVDS_FAULT_REPORT");
  std::ostringstream out;
  out << "| run | rank | signal | delay ms | survivors failed | naming it | detect s | launcher rc | "
         "launcher end s | left running | message seen |\n|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& o : all) {
    char row[2048];
    snprintf(row, sizeof(row), "| %d | %d | %s | %d | %d | %d | %.3f | %d | %.2f | %d | %s |\n", o.run,
             o.victim, SigName(o.sig), o.delay_ms, o.survivors_failed, o.survivors_naming,
             o.detect_max, o.launcher_rc, o.launcher_end, o.leftovers, Escape(o.message).c_str());
    out << row;
  }
  for (int sig : {SIGKILL, SIGSTOP}) {
    std::vector<double> d;
    int ok = 0, runs = 0;
    for (const auto& o : all) {
      if (o.sig != sig) continue;
      runs++;
      ok += o.problems.empty();
      d.push_back(o.detect_max);
    }
    if (d.empty()) continue;
    std::sort(d.begin(), d.end());
    char line[256];
    snprintf(line, sizeof(line),
             "\n%s: %d runs, %d fully detected and cleaned up; detect s min %.3f median %.3f "
             "max %.3f\n",
             SigName(sig), runs, ok, d.front(), d[d.size() / 2], d.back());
    out << line;
  }
  out << "seed " << seed << "\n";
  std::printf("%s", out.str().c_str());
  if (path != nullptr && *path) std::ofstream(path) << out.str();
}

TEST(Faults, RandomRankKilledOrStoppedIsNamedByEverySurvivor) {
  long runs = rel::EnvLong("HVDS_FAULT_RUNS", 6);
  long seed = rel::EnvLong("HVDS_FAULT_SEED", 1);
  std::mt19937 rng((unsigned)seed);
  std::vector<Outcome> all;
  for (long i = 0; i < runs; i++) {
    int victim = std::uniform_int_distribution<int>(0, kNp - 1)(rng);
    int delay_ms = std::uniform_int_distribution<int>(0, 1500)(rng);
    int sig = i % 2 == 0 ? SIGKILL : SIGSTOP;  // both, equally often
    Outcome o = RunOnce((int)i, victim, sig, delay_ms);
    std::printf("run %ld: rank %d %s after %d ms: detect %.3f s, launcher rc %d in %.2f s%s\n", i,
                victim, SigName(sig), delay_ms, o.detect_max, o.launcher_rc, o.launcher_end,
                o.problems.empty() ? "" : " PROBLEM");
    std::fflush(stdout);
    EXPECT_EQ(o.problems, "") << "run " << i;
    all.push_back(o);
  }
  Report(all, seed);
}

}  // namespace
