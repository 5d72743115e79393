/* `hvdsparse check-build`: what this build can do, in horovodrun --check-build's format.
 * A framework counts when its hvdsparse binding imports, in the environment workers get, with
 * the Python of worker_python(); a missing one names that Python and why. The tensor operations and components are the ones this build
 * runs. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "device_library.h"
#include "env.h"
#include "hvdsparse.h"
#include "launcher.h"
#include "run_args.h"
#include "spawn.h"

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
/* Whether this build made the device library (ops/nccl/ and cuda/). */
#ifdef HVDS_BUILD_NCCL
#define BUILT_NCCL 1
#else
#define BUILT_NCCL 0
#endif

/* Seconds an import may take: a framework such as TensorFlow takes several on a loaded machine,
 * but check-build must answer, not hang. */
#define IMPORT_SECONDS 60

/* The Python workers most likely run: HVDSPARSE_PYTHON (a pip install's command sets it to its
 * own), python3 next to this launcher (a virtual environment's bin/, activated or not), else the
 * first python3 on PATH, as a full path when found. */
static void worker_python(char* out, size_t len) {
  const char* given = hvds__launcher_getenv("HVDSPARSE_PYTHON");
  if (given != NULL && given[0] != '\0') {
    snprintf(out, len, "%s", given);
    return;
  }
  char dir[PATH_MAX];
  hvds__launcher_exe_dir(dir, sizeof(dir));
  snprintf(out, len, "%.4000s/python3", dir);
  if (dir[0] != '\0' && access(out, X_OK) == 0) return;
  const char* path = hvds__launcher_getenv("PATH");
  for (const char* p = path ? path : ""; *p; p += *p == ':') {
    size_t n = strcspn(p, ":");
    snprintf(out, len, "%.*s/python3", (int)n, p);
    if (n > 0 && access(out, X_OK) == 0) return;
    p += n;
  }
  snprintf(out, len, "python3");
}

typedef struct {
  int status;      /* 1 imported, 0 failed, -1 did not finish within IMPORT_SECONDS */
  char why[256];   /* the last line the failed import wrote to stderr */
} import_t;

/* The last non-empty line of a stream read in pieces. */
typedef struct {
  char cur[256], last[256];
  size_t n;
} last_line_t;

static void last_line_feed(last_line_t* l, const char* p, size_t len) {
  for (size_t i = 0; i < len; i++) {
    if (p[i] != '\n') {
      if (l->n + 1 < sizeof(l->cur)) l->cur[l->n++] = p[i];
      continue;
    }
    if (l->n == 0) continue;
    l->cur[l->n] = '\0';
    memcpy(l->last, l->cur, l->n + 1);
    l->n = 0;
  }
}

/* Reads what the non-blocking fd has now into l. */
static void drain(int fd, last_line_t* l) {
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) last_line_feed(l, buf, (size_t)n);
}

/* `python -c 'import <module>'` in a worker's environment; stdout discarded, stderr's last line
 * kept as the reason. Killed after IMPORT_SECONDS. */
static import_t python_imports(const char* python, const char* module) {
  import_t r = {0, ""};
  hvds_run_args_t args = {0};
  hvds_env_list_t env = {0};
  hvds__python_env(&args, &env);
  char code[128];
  snprintf(code, sizeof(code), "import %s", module);
  char* argv[] = {(char*)python, "-c", code, NULL};
  int err_pipe[2];
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    hvds__env_list_free(&env);
    return r;
  }
  // fork and exec rather than posix_spawn: launcher/spawn.h shadows <spawn.h> on this path.
  pid_t pid = fork();
  if (pid == 0) {
    for (int i = 0; i < env.n; i++)
      if (env.items[i].value) setenv(env.items[i].name, env.items[i].value, 1);
    int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
      dup2(devnull, STDIN_FILENO);
      dup2(devnull, STDOUT_FILENO);
    }
    dup2(err_pipe[1], STDERR_FILENO);
    execvp(argv[0], argv);
    fprintf(stderr, "cannot execute %s: %s\n", python, strerror(errno));
    _exit(127);
  }
  close(err_pipe[1]);
  fcntl(err_pipe[0], F_SETFL, O_NONBLOCK);
  hvds__env_list_free(&env);
  last_line_t err = {"", "", 0};
  int status = 0;
  struct timespec tick = {0, 20 * 1000000L};
  for (int waited_ms = 0; pid > 0; waited_ms += 20) {
    drain(err_pipe[0], &err);
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) {
      drain(err_pipe[0], &err);
      last_line_feed(&err, "\n", 1);
      r.status = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      break;
    }
    if (w < 0) break;
    if (waited_ms >= IMPORT_SECONDS * 1000) {
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      r.status = -1;
      break;
    }
    nanosleep(&tick, NULL);
  }
  close(err_pipe[0]);
  snprintf(r.why, sizeof(r.why), "%s", err.last);
  return r;
}

static const char* mark(int yes) { return yes > 0 ? "[X]" : "[ ]"; }

/* One framework's line; a failed import says which Python tried and why. */
static void framework_line(const char* name, const char* python, const import_t* r) {
  printf("    %s %s", mark(r->status), name);
  if (r->status < 0) printf(" (%s: import did not finish within %d s)", python, IMPORT_SECONDS);
  if (r->status == 0) printf(" (%s: %s)", python, r->why[0] ? r->why : "import failed");
  printf("\n");
}

/* The device library as this process finds it (the runtime finds it the same way), else why
 * not and what the build made. */
static void device_line(void) {
  char why[512], path[PATH_MAX];
  const hvds_device_api_t* api = hvds__device_library(why, sizeof(why), path, sizeof(path));
  if (api == NULL) {
    printf("    [ ] device library (%s; %s)\n", why,
           BUILT_NCCL  ? "this build made one: is it installed beside libhvdsparse.so?"
           : HAVE_CUDA ? "this build made none: CUDA off, or no nvcc or NCCL"
                       : "this build found no CUDA toolkit");
    return;
  }
  char gpus[256];
  int v = api->nccl_version(), c = api->cuda_runtime_version();
  int n = api->device_count(gpus, sizeof(gpus));
  printf(
      "    [X] device library: %s (NCCL %d.%d.%d, CUDA runtime %d.%d, %d GPU%s%s%s); GPU "
      "tensors are staged through page-locked host memory (HVDSPARSE_GPU_OPERATIONS=host, the "
      "default), or their collectives run by NCCL on the GPU (=nccl)\n",
      path, v / 10000, v / 100 % 100, v % 100, c / 1000, c % 1000 / 10, n, n == 1 ? "" : "s",
      gpus[0] ? ": " : "", gpus);
}

int hvds__launcher_check_build(void) {
  char python[PATH_MAX];
  worker_python(python, sizeof(python));
  import_t tf = python_imports(python, "hvdsparse.tensorflow");
  import_t torch = python_imports(python, "hvdsparse.torch");
  printf("hvdsparse v%s:\n\n", HVDS_VERSION_STRING);
  printf("Available Frameworks:\n");
  framework_line("TensorFlow", python, &tf);
  framework_line("PyTorch", python, &torch);
  printf("    [ ] MXNet\n\n");
  printf("Available Controllers:\n    [ ] MPI\n    [X] Gloo\n\n");
  /* NCCL counts as a tensor operation once the runtime runs device tensors through it; until
   * then the device library is listed as a component only, staging GPU tensors for Gloo
   * (docs/gpu.md). */
  printf("Available Tensor Operations:\n    [ ] NCCL\n    [ ] DDL\n    [ ] CCL\n    [ ] MPI\n"
         "    [X] Gloo\n\n");
  printf("Available Components:\n");
  device_line();
  printf("    %s hwloc topology\n", mark(HAVE_HWLOC));
  return 0;
}
