// Starting an N-rank job the way another engine would: under mpirun, or as N processes given a
// Slurm-like or a torchrun-style environment. Each job has a deadline; at it the processes this
// harness started (and mpirun's own children) are killed by pid.
#ifndef HVDS_TEST_LAUNCH_JOBS_H_
#define HVDS_TEST_LAUNCH_JOBS_H_

#include <functional>
#include <string>
#include <vector>

namespace launch_test {

enum class Engine { kMpirun, kSlurm, kTorchrun };

const char* EngineName(Engine e);

struct JobResult {
  bool timed_out = false;
  std::vector<int> status;          // per process started: exit code, or 128 + signal
  std::vector<std::string> output;  // per process started, stdout and stderr interleaved
  bool AllExitedZero() const;
  std::string AllOutput() const;
};

struct JobSpec {
  Engine engine = Engine::kTorchrun;
  int np = 4;
  std::vector<std::string> argv;  // the worker command
  std::vector<std::string> env;   // NAME=VALUE for every rank
  // Extra NAME=VALUE for one rank (Slurm and torchrun only: mpirun gives every rank the same).
  std::function<std::vector<std::string>(int rank)> rank_env;
  int timeout_s = 60;
};

// Runs the job to completion or to its deadline. Engine variables of this test's own
// environment (RANK, OMPI_*, SLURM_*, HVDSPARSE_RANK, ...) never reach the workers.
JobResult RunJob(const JobSpec& spec);

// Runs a launcher (mpirun, torchrun) that starts the workers itself; at the deadline it is asked
// to stop them (SIGTERM), then it and its children are killed.
JobResult RunLauncher(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                      int timeout_s);

// A TCP port on 127.0.0.1 that was free a moment ago.
int FreePort();
// 1 when nothing listens on 127.0.0.1:port now.
bool PortFree(int port);

}  // namespace launch_test

#endif  // HVDS_TEST_LAUNCH_JOBS_H_
