/* Corpus replay: a main() for builds without libFuzzer (gcc, the normal `make test`). Each
 * argument is a file or a directory of files; every file is fed once to LLVMFuzzerTestOneInput.
 * Exits non-zero when no input was found, so a missing corpus fails the test instead of passing
 * vacuously. A failed property aborts inside the target. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

/* Reads path and runs it. Returns 1 when run, 0 when it is not a regular file, -1 on I/O error. */
static int replay_file(const char* path) {
  struct stat st;
  if (stat(path, &st) != 0) return -1;
  if (!S_ISREG(st.st_mode)) return 0;
  FILE* f = fopen(path, "rb");
  if (f == NULL) return -1;
  // One spare byte so an empty file still gets a non-NULL buffer, as libFuzzer gives.
  uint8_t* data = malloc((size_t)st.st_size + 1);
  size_t n = data ? fread(data, 1, (size_t)st.st_size, f) : 0;
  int bad = data == NULL || ferror(f);
  fclose(f);
  if (!bad) LLVMFuzzerTestOneInput(data, n);
  free(data);
  return bad ? -1 : 1;
}

/* Runs path, or every file directly inside it. Returns the count run, or -1 on error. */
static long replay_path(const char* path) {
  DIR* dir = opendir(path);
  if (dir == NULL) return replay_file(path);
  long count = 0;
  struct dirent* e;
  while (count >= 0 && (e = readdir(dir)) != NULL) {
    if (e->d_name[0] == '.') continue;
    size_t len = strlen(path) + strlen(e->d_name) + 2;
    char* file = malloc(len);
    if (file == NULL) {
      count = -1;
      break;
    }
    snprintf(file, len, "%s/%s", path, e->d_name);
    int rc = replay_file(file);
    if (rc < 0) fprintf(stderr, "replay: cannot read %s\n", file);
    count = rc < 0 ? -1 : count + rc;
    free(file);
  }
  closedir(dir);
  return count;
}

int main(int argc, char** argv) {
  long total = 0;
  for (int i = 1; i < argc; i++) {
    long n = replay_path(argv[i]);
    if (n < 0) {
      fprintf(stderr, "replay: cannot read %s\n", argv[i]);
      return 1;
    }
    total += n;
  }
  printf("replayed %ld inputs\n", total);
  return total > 0 ? 0 : 1;
}
