/* `hvdsparse check-build`: what this build can do, in horovodrun --check-build's format.
 * A framework counts when its hvdsparse binding imports with python3 in the environment workers
 * get; the tensor operations and components are the ones this build runs. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hvdsparse.h"
#include "launcher.h"
#include "run_args.h"
#include "spawn.h"

#ifdef HVDS_HAVE_NCCL
#define HAVE_NCCL 1
#else
#define HAVE_NCCL 0
#endif
#ifdef HVDS_HAVE_CUDA
#define HAVE_CUDA 1
#else
#define HAVE_CUDA 0
#endif
#ifdef HVDS_HAVE_HWLOC
#define HAVE_HWLOC 1
#else
#define HAVE_HWLOC 0
#endif
/* What this build compiled: the CUDA kernels (cuda/) and the NCCL backend (ops/nccl/). */
#ifdef HVDS_BUILD_CUDA
#define BUILT_CUDA 1
#else
#define BUILT_CUDA 0
#endif
#ifdef HVDS_BUILD_NCCL
#define BUILT_NCCL 1
#else
#define BUILT_NCCL 0
#endif

/* Seconds an import may take: a framework such as TensorFlow takes several on a loaded machine,
 * but check-build must answer, not hang. */
#define IMPORT_SECONDS 60

/* 1 when `python3 -c 'import <module>'` succeeds in a worker's environment (output discarded),
 * 0 when it fails, -1 when it did not finish within IMPORT_SECONDS (then it is killed). */
static int python_imports(const char* module) {
  hvds_run_args_t args = {0};
  hvds_env_list_t env = {0};
  hvds__python_env(&args, &env);
  char code[128];
  snprintf(code, sizeof(code), "import %s", module);
  char* argv[] = {"python3", "-c", code, NULL};
  // fork and exec rather than posix_spawn: launcher/spawn.h shadows <spawn.h> on this path.
  pid_t pid = fork();
  if (pid == 0) {
    for (int i = 0; i < env.n; i++)
      if (env.items[i].value) setenv(env.items[i].name, env.items[i].value, 1);
    int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
      dup2(devnull, STDIN_FILENO);
      dup2(devnull, STDOUT_FILENO);
      dup2(devnull, STDERR_FILENO);
    }
    execvp(argv[0], argv);
    _exit(127);
  }
  hvds__env_list_free(&env);
  if (pid < 0) return 0;
  int status = 0;
  struct timespec tick = {0, 20 * 1000000L};
  for (int waited_ms = 0;; waited_ms += 20) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (r < 0) return 0;
    if (waited_ms >= IMPORT_SECONDS * 1000) {
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0) {
      }
      return -1;
    }
    nanosleep(&tick, NULL);
  }
}

static const char* mark(int yes) { return yes > 0 ? "[X]" : "[ ]"; }

/* One framework's line; an import that did not finish says so. */
static void framework_line(const char* name, int yes) {
  printf("    %s %s", mark(yes), name);
  if (yes < 0) printf(" (import did not finish within %d s)", IMPORT_SECONDS);
  printf("\n");
}

int hvds__launcher_check_build(void) {
  int tf = python_imports("hvdsparse.tensorflow");
  int torch = python_imports("hvdsparse.torch");
  printf("hvdsparse v%s:\n\n", HVDS_VERSION_STRING);
  printf("Available Frameworks:\n");
  framework_line("TensorFlow", tf);
  framework_line("PyTorch", torch);
  printf("    [ ] MXNet\n\n");
  printf("Available Controllers:\n    [ ] MPI\n    [X] Gloo\n\n");
  /* NCCL counts as a tensor operation once the runtime runs device tensors through it; until
   * then the built kernels and backend are listed as components only (docs/gpu.md). */
  printf("Available Tensor Operations:\n    [ ] NCCL\n    [ ] DDL\n    [ ] CCL\n    [ ] MPI\n"
         "    [X] Gloo\n\n");
  printf("Available Components:\n    %s CUDA kernels (%s)\n    %s NCCL backend (%s)\n"
         "    %s hwloc topology\n",
         mark(BUILT_CUDA), BUILT_CUDA ? "built; not yet used by the runtime"
                           : HAVE_CUDA ? "toolkit found; off or no nvcc" : "toolkit not found",
         mark(BUILT_NCCL), BUILT_NCCL ? "built; not yet used by the runtime"
                           : HAVE_NCCL ? "NCCL found; needs the CUDA kernels" : "NCCL not found",
         mark(HAVE_HWLOC));
  return 0;
}
