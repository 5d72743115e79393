/* The single place where the launcher reads its environment (and its own location) directly. */
#include "env.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char** environ;

const char* hvds__launcher_getenv(const char* name) { return getenv(name); }

char** hvds__launcher_environ(void) { return environ; }

void hvds__launcher_exe_dir(char* out, size_t len) {
  ssize_t n = readlink("/proc/self/exe", out, len - 1);
  out[n > 0 ? n : 0] = '\0';
  char* slash = strrchr(out, '/');
  if (slash) *slash = '\0';
}
