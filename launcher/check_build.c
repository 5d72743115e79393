/* `hvdsparse check-build`: what this build can do, in horovodrun --check-build's format.
 * Frameworks are probed by importing them with python3; the rest is fixed at compile time. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "include/hvdsparse.h"
#include "launcher.h"

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

/* 1 when `python3 -c 'import <module>'` succeeds (its output is discarded). */
static int python_imports(const char* module) {
  char code[128];
  snprintf(code, sizeof(code), "import %s", module);
  char* argv[] = {"python3", "-c", code, NULL};
  // fork and exec rather than posix_spawn: launcher/spawn.h shadows <spawn.h> on this path.
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
      dup2(devnull, STDIN_FILENO);
      dup2(devnull, STDOUT_FILENO);
      dup2(devnull, STDERR_FILENO);
    }
    execvp(argv[0], argv);
    _exit(127);
  }
  if (pid < 0) return 0;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static const char* mark(int yes) { return yes ? "[X]" : "[ ]"; }

int hvds__launcher_check_build(void) {
  int tf = python_imports("tensorflow");
  int torch = python_imports("torch");
  printf("hvdsparse v%s:\n\n", HVDS_VERSION_STRING);
  printf("Available Frameworks:\n    %s TensorFlow\n    %s PyTorch\n    [ ] MXNet\n\n", mark(tf),
         mark(torch));
  printf("Available Controllers:\n    [ ] MPI\n    [X] Gloo\n\n");
  printf("Available Tensor Operations:\n    %s NCCL\n    [ ] DDL\n    [ ] CCL\n    [ ] MPI\n"
         "    [X] Gloo\n\n",
         mark(HAVE_NCCL));
  printf("Available Components:\n    %s CUDA kernels\n    %s hwloc topology\n", mark(HAVE_CUDA),
         mark(HAVE_HWLOC));
  return 0;
}
