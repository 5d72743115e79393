/* Starting workers: environment, command line (local, ssh, or an rsh agent), fork and exec. */
#define _GNU_SOURCE
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "env.h"
#include "log.h"
#include "malloc_env.h"
#include "remote_env.h"

/* Linux takes one argument of at most 32 pages (MAX_ARG_STRLEN); ssh's command line is one. */
#define SSH_LINE_MAX (128 * 1024 - 1)

static hvds_result_t random_hex(char* out, size_t nbytes) {
  unsigned char raw[64];
  if (nbytes > sizeof(raw)) return HVDS_INVALID_ARGUMENT;
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return HVDS_SYSTEM_ERROR;
  size_t got = 0;
  while (got < nbytes) {
    ssize_t n = read(fd, raw + got, nbytes - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += (size_t)n;
  }
  close(fd);
  if (got < nbytes) return HVDS_SYSTEM_ERROR;
  for (size_t i = 0; i < nbytes; i++) sprintf(out + 2 * i, "%02x", raw[i]);
  return HVDS_SUCCESS;
}

hvds_result_t hvds__job_make_ids(hvds_job_t* job) {
  if (random_hex(job->secret, 32) != HVDS_SUCCESS || random_hex(job->job_id, 8) != HVDS_SUCCESS) {
    HVDS_ERROR("cannot read /dev/urandom for the job secret");
    return HVDS_SYSTEM_ERROR;
  }
  return HVDS_SUCCESS;
}

/* Sets HVDSPARSE_<suffix> and HOROVOD_<suffix>. */
static hvds_result_t set_both(hvds_env_list_t* env, const char* suffix, const char* value) {
  char name[256];
  snprintf(name, sizeof(name), "HVDSPARSE_%s", suffix);
  hvds_result_t rc = hvds__env_list_set(env, name, value);
  if (rc != HVDS_SUCCESS) return rc;
  snprintf(name, sizeof(name), "HOROVOD_%s", suffix);
  return hvds__env_list_set(env, name, value);
}

static hvds_result_t set_both_int(hvds_env_list_t* env, const char* suffix, long long v) {
  char text[32];
  snprintf(text, sizeof(text), "%lld", v);
  return set_both(env, suffix, text);
}

static hvds_result_t add_identity(const hvds_job_t* job, const hvds_slot_t* s,
                                  hvds_env_list_t* env) {
  hvds_result_t rc = HVDS_SUCCESS;
  if (rc == HVDS_SUCCESS) rc = set_both_int(env, "RANK", s->rank);
  if (rc == HVDS_SUCCESS) rc = set_both_int(env, "SIZE", s->size);
  if (rc == HVDS_SUCCESS) rc = set_both_int(env, "LOCAL_RANK", s->local_rank);
  if (rc == HVDS_SUCCESS) rc = set_both_int(env, "LOCAL_SIZE", s->local_size);
  if (rc == HVDS_SUCCESS) rc = set_both_int(env, "CROSS_RANK", s->cross_rank);
  if (rc == HVDS_SUCCESS) rc = set_both_int(env, "CROSS_SIZE", s->cross_size);
  if (rc == HVDS_SUCCESS) rc = set_both(env, "HOSTNAME", s->hostname);
  if (rc == HVDS_SUCCESS) rc = set_both(env, "GLOO_RENDEZVOUS_ADDR", job->store_addr);
  if (rc == HVDS_SUCCESS) rc = set_both_int(env, "GLOO_RENDEZVOUS_PORT", job->store_port);
  if (rc == HVDS_SUCCESS) rc = set_both(env, "SECRET", job->secret);
  if (rc == HVDS_SUCCESS) rc = set_both(env, "JOB_ID", job->job_id);
  if (rc == HVDS_SUCCESS) rc = hvds__env_list_set(env, "HOROVOD_CONTROLLER", "gloo");
  if (rc == HVDS_SUCCESS) rc = hvds__env_list_set(env, "HOROVOD_CPU_OPERATIONS", "gloo");
  return rc;
}

static int same_dir(const char* a, const char* b) {
  char ra[PATH_MAX], rb[PATH_MAX];
  return realpath(a, ra) && realpath(b, rb) && strcmp(ra, rb) == 0;
}

/* Python side of the workers' environment. From a build tree: the source tree's framework
 * packages on PYTHONPATH and HVDSPARSE_LIBRARY at the built library (unless already set). With
 * --horovod-alias: the alias directory (`import horovod.torch` loads hvdsparse.torch) in front:
 * HVDSPARSE_ALIAS_DIR when set (a pip install's command sets it), else the source tree's or
 * <prefix>/share/hvdsparse/alias next to an installed launcher. */
hvds_result_t hvds__python_env(const hvds_run_args_t* a, hvds_env_list_t* env) {
  char dir[PATH_MAX], alias[PATH_MAX + 64] = "", paths[4 * PATH_MAX] = "";
  hvds__launcher_exe_dir(dir, sizeof(dir));
  int in_build = 0;
#ifdef HVDS_BUILD_BIN_DIR
  in_build = dir[0] != '\0' && same_dir(dir, HVDS_BUILD_BIN_DIR);
#endif
  if (a->horovod_alias) {
    // A pip install's command says where the alias is; else the build tree or <prefix>/share.
    const char* given = hvds__launcher_getenv("HVDSPARSE_ALIAS_DIR");
#ifdef HVDS_SOURCE_DIR
    if (in_build) snprintf(alias, sizeof(alias), "%s/frameworks/alias", HVDS_SOURCE_DIR);
#endif
    if (!in_build) snprintf(alias, sizeof(alias), "%s/../share/hvdsparse/alias", dir);
    if (given != NULL && given[0] != '\0') snprintf(alias, sizeof(alias), "%s", given);
    if (access(alias, R_OK) != 0) {
      HVDS_WARN("--horovod-alias: %s not found; `import horovod` is left alone", alias);
      alias[0] = '\0';
    }
  }
  size_t len = 0;
  if (alias[0]) len += (size_t)snprintf(paths + len, sizeof(paths) - len, "%s:", alias);
#if defined(HVDS_SOURCE_DIR) && defined(HVDS_BUILD_LIBRARY)
  if (in_build) {
    const char* src = HVDS_SOURCE_DIR;
    len += (size_t)snprintf(paths + len, sizeof(paths) - len,
                            "%s/frameworks/common:%s/frameworks/pytorch:%s/frameworks/tensorflow:",
                            src, src, src);
    if (hvds__env_list_get(env, "HVDSPARSE_LIBRARY") == NULL &&
        hvds__launcher_getenv("HVDSPARSE_LIBRARY") == NULL) {
      hvds_result_t rc = hvds__env_list_set(env, "HVDSPARSE_LIBRARY", HVDS_BUILD_LIBRARY);
      if (rc != HVDS_SUCCESS) return rc;
    }
  }
#endif
  if (len == 0) return HVDS_SUCCESS;
  const char* old = hvds__env_list_get(env, "PYTHONPATH");
  if (old == NULL) old = hvds__launcher_getenv("PYTHONPATH");
  if (old != NULL && old[0] != '\0' && len < sizeof(paths))
    snprintf(paths + len, sizeof(paths) - len, "%s", old);
  else
    paths[len - 1] = '\0';  // drop the trailing ':'
  return hvds__env_list_set(env, "PYTHONPATH", paths);
}

hvds_result_t hvds__worker_env(const hvds_job_t* job, int rank, hvds_env_list_t* env) {
  memset(env, 0, sizeof(*env));
  const hvds_run_args_t* a = job->args;
  hvds_result_t rc = HVDS_SUCCESS;
  // -x first, so that flags and the job's identity win over a stray -x HOROVOD_RANK=...
  for (int i = 0; i < a->xvars.n && rc == HVDS_SUCCESS; i++) {
    const char* v = a->xvars.items[i].value;
    if (v == NULL) v = hvds__launcher_getenv(a->xvars.items[i].name);
    if (v == NULL) {
      HVDS_WARN("-x %s: not set in the launcher's environment; not forwarded",
                a->xvars.items[i].name);
      continue;
    }
    rc = hvds__env_list_set(env, a->xvars.items[i].name, v);
  }
  if (rc == HVDS_SUCCESS) rc = hvds__env_list_set(env, "PYTHONUNBUFFERED", "1");
  for (int i = 0; i < a->knobs.n && rc == HVDS_SUCCESS; i++)
    rc = set_both(env, a->knobs.items[i].name, a->knobs.items[i].value);
  if (rc == HVDS_SUCCESS && a->horovod_alias) rc = set_both(env, "HOROVOD_ALIAS", "1");
  if (rc == HVDS_SUCCESS) rc = hvds__python_env(a, env);
  if (rc == HVDS_SUCCESS && a->keep_freed_memory) rc = hvds__malloc_env(env);
  if (rc == HVDS_SUCCESS) rc = add_identity(job, &job->slots[rank], env);
  if (rc != HVDS_SUCCESS) hvds__env_list_free(env);
  return rc;
}

void hvds__argv_free(char** argv) {
  if (argv == NULL) return;
  for (char** p = argv; *p; p++) free(*p);
  free(argv);
}

typedef struct {
  char** v;
  int n, cap;
  int failed;
} argv_builder_t;

static void push(argv_builder_t* b, const char* s) {
  if (b->failed) return;
  if (b->n + 2 > b->cap) {
    int cap = b->cap ? b->cap * 2 : 32;
    char** v = realloc(b->v, (size_t)cap * sizeof(*v));
    if (v == NULL) {
      b->failed = 1;
      return;
    }
    b->v = v;
    b->cap = cap;
  }
  char* copy = strdup(s);
  if (copy == NULL) {
    b->failed = 1;
    return;
  }
  b->v[b->n++] = copy;
  b->v[b->n] = NULL;
}

static void push_kv(argv_builder_t* b, const char* name, const char* value) {
  size_t len = strlen(name) + strlen(value) + 2;
  char* kv = malloc(len);
  if (kv == NULL) {
    b->failed = 1;
    return;
  }
  snprintf(kv, len, "%s=%s", name, value);
  push(b, kv);
  free(kv);
}

/* Appends s to the growing string *out, single-quoted for a POSIX shell. */
static int append_quoted(char** out, size_t* len, const char* s, int quote) {
  size_t need = *len + 4 * strlen(s) + 4;
  char* p = realloc(*out, need);
  if (p == NULL) return -1;
  *out = p;
  p += *len;
  if (quote) *p++ = '\'';
  for (const char* c = s; *c; c++) {
    if (quote && *c == '\'') {
      memcpy(p, "'\\''", 4);
      p += 4;
    } else {
      *p++ = *c;
    }
  }
  if (quote) *p++ = '\'';
  *p = '\0';
  *len = (size_t)(p - *out);
  return 0;
}

/* The remote shell line: cd <cwd> >/dev/null 2>&1; env VAR=... <cmd>, carrying the launcher's
 * environment (remote_env.h) and then the job's variables. */
static char* ssh_command_line(const hvds_job_t* job, const hvds_env_list_t* env) {
  char* line = NULL;
  size_t len = 0;
  int bad = append_quoted(&line, &len, "cd ", 0) || append_quoted(&line, &len, job->cwd, 1) ||
            append_quoted(&line, &len, " >/dev/null 2>&1; env", 0);
  for (char** e = hvds__launcher_environ(); *e && !bad; e++) {
    const char* eq = strchr(*e, '=');
    if (!hvds__remote_env_forwards(*e)) continue;
    char name[256];
    snprintf(name, sizeof(name), "%.*s", (int)(eq - *e), *e);
    if (hvds__env_list_get(env, name) != NULL) continue;  // the job's value wins
    bad = append_quoted(&line, &len, " ", 0) || append_quoted(&line, &len, *e, 1);
  }
  for (int i = 0; i < env->n && !bad; i++) {
    bad = append_quoted(&line, &len, " ", 0) ||
          append_quoted(&line, &len, env->items[i].name, 0) ||
          append_quoted(&line, &len, "=", 0) ||
          append_quoted(&line, &len, env->items[i].value, 1);
  }
  for (int i = 0; i < job->args->ncommand && !bad; i++)
    bad = append_quoted(&line, &len, " ", 0) ||
          append_quoted(&line, &len, job->args->command[i], 1);
  if (!bad && len > SSH_LINE_MAX) {
    HVDS_ERROR("the command line for ssh (the environment forwarded to remote workers and the "
               "command) is %zu bytes, over Linux's %d for one argument; unset large variables "
               "in the launcher's environment",
               len, SSH_LINE_MAX);
    bad = 1;
  }
  if (bad) {
    free(line);
    return NULL;
  }
  return line;
}

hvds_result_t hvds__worker_argv(const hvds_job_t* job, int rank, const hvds_env_list_t* env,
                                char*** argv) {
  const hvds_run_args_t* a = job->args;
  const char* host = job->slots[rank].hostname;
  argv_builder_t b = {0};
  if (hvds__host_is_local(host)) {
    for (int i = 0; i < a->ncommand; i++) push(&b, a->command[i]);
  } else if (a->rsh != NULL) {
    // Agent words, host, then env VAR=... command: argv all the way, no shell quoting.
    char* agent = strdup(a->rsh);
    char* save = NULL;
    if (agent == NULL) b.failed = 1;
    for (char* w = agent ? strtok_r(agent, " \t", &save) : NULL; w; w = strtok_r(NULL, " \t", &save))
      push(&b, w);
    free(agent);
    push(&b, host);
    push(&b, "env");
    for (int i = 0; i < env->n; i++) push_kv(&b, env->items[i].name, env->items[i].value);
    for (int i = 0; i < a->ncommand; i++) push(&b, a->command[i]);
  } else {
    push(&b, "ssh");
    push(&b, "-o");
    push(&b, "PasswordAuthentication=no");
    push(&b, "-o");
    push(&b, "StrictHostKeyChecking=no");
    if (a->ssh_port > 0) {
      char port[16];
      snprintf(port, sizeof(port), "%d", a->ssh_port);
      push(&b, "-p");
      push(&b, port);
    }
    if (a->ssh_identity) {
      push(&b, "-i");
      push(&b, a->ssh_identity);
    }
    push(&b, host);
    char* line = ssh_command_line(job, env);
    if (line == NULL) b.failed = 1;
    if (line) push(&b, line);
    free(line);
  }
  if (b.failed || b.n == 0) {
    hvds__argv_free(b.v);
    return HVDS_SYSTEM_ERROR;
  }
  *argv = b.v;
  return HVDS_SUCCESS;
}

/* The launcher's environment with env's variables replacing or added. */
static char** merged_envp(const hvds_env_list_t* env) {
  argv_builder_t b = {0};
  for (char** e = hvds__launcher_environ(); *e; e++) {
    const char* eq = strchr(*e, '=');
    size_t n = eq ? (size_t)(eq - *e) : strlen(*e);
    int overridden = 0;
    for (int i = 0; i < env->n && !overridden; i++)
      overridden = strlen(env->items[i].name) == n && strncmp(env->items[i].name, *e, n) == 0;
    if (!overridden) push(&b, *e);
  }
  for (int i = 0; i < env->n; i++) push_kv(&b, env->items[i].name, env->items[i].value);
  if (b.failed) {
    hvds__argv_free(b.v);
    return NULL;
  }
  return b.v;
}

static void say(const char* s) { (void)!write(STDERR_FILENO, s, strlen(s)); }

/* Why execvpe(argv0) failed with err, with a hint; async-signal-safe (write and access only). */
static void say_exec_failure(const char* argv0, int err) {
  int has_slash = strchr(argv0, '/') != NULL;
  say("hvdsparse: cannot execute ");
  say(argv0);
  say(": ");
  if (err == ENOENT && !has_slash && access(argv0, F_OK) == 0) {
    say("not found in PATH (the working directory has a file of that name: run ./");
    say(argv0);
    say(", or the script through its interpreter, e.g. python ");
    say(argv0);
    say(")");
  } else if (err == ENOENT && !has_slash) {
    say("not found in PATH");
  } else if (err == ENOENT && access(argv0, F_OK) == 0) {
    say("its interpreter (the #! line) was not found");
  } else if (err == ENOENT) {
    say("no such file");
  } else if (err == EACCES || err == EPERM) {
    say("permission denied (not executable? run a script through its interpreter, e.g. python ");
    say(argv0);
    say(", or chmod +x it)");
  } else if (err == ENOEXEC) {
    say("not a program this machine can run (a script needs a #! line, or run it through its "
        "interpreter)");
  } else if (err == ENOTDIR) {
    say("a directory in its path is a file");
  } else if (err == E2BIG) {
    say("the argument list and environment are too large");
  } else if (err == ENOMEM) {
    say("out of memory");
  } else {
    char num[16];
    int n = 0;
    for (int v = err; v > 0 && n < 15; v /= 10) n++;
    num[n] = '\0';
    for (int v = err, i = n - 1; i >= 0; v /= 10, i--) num[i] = (char)('0' + v % 10);
    say("errno ");
    say(num);
  }
  say("\n");
}

/* In the child between fork and exec: only async-signal-safe calls. */
static void exec_child(pid_t parent, int devnull, int out_w, int err_w, char** argv, char** envp) {
  setsid();
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // a SIGKILLed launcher takes its direct children along
  if (getppid() != parent) _exit(127);
  dup2(devnull, STDIN_FILENO);
  dup2(out_w, STDOUT_FILENO);
  dup2(err_w, STDERR_FILENO);
  for (int sig = 1; sig < NSIG; sig++) signal(sig, SIG_DFL);  // fails harmlessly for some
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  execvpe(argv[0], argv, envp);
  say_exec_failure(argv[0], errno);
  _exit(127);
}

hvds_result_t hvds__spawn_worker(const hvds_job_t* job, int rank, hvds_worker_t* w) {
  hvds_env_list_t env = {0};
  char** argv = NULL;
  char** envp = NULL;
  int out_p[2] = {-1, -1}, err_p[2] = {-1, -1}, devnull = -1;
  hvds_result_t rc = hvds__worker_env(job, rank, &env);
  if (rc == HVDS_SUCCESS) rc = hvds__worker_argv(job, rank, &env, &argv);
  if (rc == HVDS_SUCCESS && (envp = merged_envp(&env)) == NULL) rc = HVDS_SYSTEM_ERROR;
  if (rc != HVDS_SUCCESS) goto fail;
  rc = HVDS_SYSTEM_ERROR;
  if (pipe2(out_p, O_CLOEXEC) != 0 || pipe2(err_p, O_CLOEXEC) != 0) goto fail;
  devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0) goto fail;
  pid_t parent = getpid();
  // Signals stay blocked across fork until the child has reset the launcher's handlers, so a
  // SIGTERM aimed at a child that has not exec'd yet can never run the launcher's handler.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pid_t pid = fork();
  if (pid != 0) pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (pid < 0) {
    HVDS_ERROR("fork for rank %d: %s", rank, strerror(errno));
    goto fail;
  }
  if (pid == 0) exec_child(parent, devnull, out_p[1], err_p[1], argv, envp);
  close(out_p[1]);
  close(err_p[1]);
  close(devnull);
  fcntl(out_p[0], F_SETFL, O_NONBLOCK);
  fcntl(err_p[0], F_SETFL, O_NONBLOCK);
  memset(w, 0, sizeof(*w));
  w->rank = rank;
  w->pid = pid;
  w->out_fd = out_p[0];
  w->err_fd = err_p[0];
  hvds__env_list_free(&env);
  hvds__argv_free(argv);
  hvds__argv_free(envp);
  return HVDS_SUCCESS;

fail:
  for (int i = 0; i < 2; i++) {
    if (out_p[i] >= 0) close(out_p[i]);
    if (err_p[i] >= 0) close(err_p[i]);
  }
  if (devnull >= 0) close(devnull);
  hvds__env_list_free(&env);
  hvds__argv_free(argv);
  hvds__argv_free(envp);
  return rc;
}
