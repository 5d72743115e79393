/* hvdsparse: the launcher command. `hvdsparse run -np N cmd...`, `hvdsparse check-build`.
 * A horovodrun-style command line without "run" (`hvdsparse -np 2 cmd`) is accepted too. */
#include <stdio.h>
#include <string.h>

#include "hvdsparse.h"
#include "launcher.h"

static void usage(FILE* f) {
  fputs(
      "usage: hvdsparse <command> [args]\n"
      "\n"
      "Commands:\n"
      "  run -np N [flags] command ...   start N workers (see hvdsparse run --help)\n"
      "  check-build [--topology]        list the frameworks and operations this build supports\n"
      "                                  (and this machine's cores, NUMA nodes and GPUs)\n"
      "\n"
      "  -h, --help                      this text\n"
      "  -v, --version                   the version\n",
      f);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const char* cmd = argv[1];
  if (strcmp(cmd, "run") == 0) return hvds__launcher_run(argc - 2, argv + 2);
  if (strcmp(cmd, "check-build") == 0 || strcmp(cmd, "-cb") == 0 ||
      strcmp(cmd, "--check-build") == 0)
    return argc > 2 ? hvds__launcher_check_topology(argc - 2, argv + 2)
                    : hvds__launcher_check_build();
  if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
    usage(stdout);
    return 0;
  }
  if (strcmp(cmd, "-v") == 0 || strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
    printf("hvdsparse %s\n", HVDS_VERSION_STRING);
    return 0;
  }
  if (cmd[0] == '-') return hvds__launcher_run(argc - 1, argv + 1);
  fprintf(stderr, "hvdsparse: unknown command '%s'\n\n", cmd);
  usage(stderr);
  return 2;
}
