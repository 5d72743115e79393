// Starting an N-rank job the way another engine would: under mpirun, or as N processes given a
// Slurm-like, a torchrun-style or a PMI (MPICH/Intel MPI mpiexec) environment. Each job has a deadline; at it the processes this
// harness started (and mpirun's own children) are killed by pid.
#ifndef HVDS_TEST_LAUNCH_JOBS_H_
#define HVDS_TEST_LAUNCH_JOBS_H_

#include <functional>
#include <string>
#include <vector>

namespace launch_test {

enum class Engine { kMpirun, kSlurm, kTorchrun, kPmi };

const char* EngineName(Engine e);

struct JobResult {
  bool timed_out = false;
  std::vector<int> status;          // per process started: exit code, or 128 + signal
  std::vector<std::string> output;  // per process started, stdout and stderr interleaved
  std::vector<double> seconds;      // per process: from the job's start until its output ended
                                    // (it exited), or -1 when it was still running at the end
  bool AllExitedZero() const;
  std::string AllOutput() const;
};

struct JobSpec {
  Engine engine = Engine::kTorchrun;
  int np = 4;
  std::vector<std::string> argv;  // the worker command
  std::vector<std::string> env;   // NAME=VALUE for every rank
  // Extra NAME=VALUE for one rank (not mpirun: it gives every rank the same). A PMI job gets
  // HVDSPARSE_GLOO_RENDEZVOUS_PORT, as a user would: Hydra names no job to derive a port from.
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
