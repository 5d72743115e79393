/* The device library's loader: dlopen once, keep the table and the story of the attempt. */
#define _GNU_SOURCE
#include "device_library.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const hvds_device_api_t* api;
static char loaded_path[PATH_MAX];
static char failure[1024];

/* The folder of the module this code is linked into, or "" when the loader cannot tell. */
static void own_folder(char* out, size_t len) {
  Dl_info info;
  out[0] = '\0';
  if (dladdr((void*)&own_folder, &info) == 0 || info.dli_fname == NULL) return;
  const char* slash = strrchr(info.dli_fname, '/');
  if (slash != NULL) snprintf(out, len, "%.*s", (int)(slash - info.dli_fname), info.dli_fname);
}

/* Opens path and checks its table; appends why it was refused to failure. 1 when taken. */
static int try_open(const char* path) {
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  size_t used = strlen(failure);
  char* tail = failure + used;
  size_t room = sizeof(failure) - used;
  if (h == NULL) {
    const char* err = dlerror();
    snprintf(tail, room, "%s%s", used ? "; " : "", err ? err : path);
    return 0;
  }
  hvds_device_api_fn entry = (hvds_device_api_fn)dlsym(h, HVDS_DEVICE_API_SYMBOL);
  const hvds_device_api_t* table = entry != NULL ? entry() : NULL;
  if (table == NULL || table->version != HVDS_DEVICE_API_VERSION) {
    snprintf(tail, room, "%s%s: not a device library of this version (interface %d, want %d)",
             used ? "; " : "", path, table ? table->version : -1, HVDS_DEVICE_API_VERSION);
    dlclose(h);
    return 0;
  }
  int nccl = table->nccl_version();
  if (nccl < HVDS_DEVICE_MIN_NCCL_VERSION) {
    snprintf(tail, room, "%s%s: the NCCL it resolved is version %d, older than %d",
             used ? "; " : "", path, nccl, HVDS_DEVICE_MIN_NCCL_VERSION);
    dlclose(h);
    return 0;
  }
  api = table;  // kept loaded for the life of the process
  if (realpath(path, loaded_path) == NULL) snprintf(loaded_path, sizeof(loaded_path), "%s", path);
  return 1;
}

static void load(void) {
  const char* given = getenv("HVDSPARSE_DEVICE_LIBRARY");
  if (given != NULL && given[0] != '\0') {
    try_open(given);
    return;
  }
  char dir[PATH_MAX], path[PATH_MAX + 64];
  own_folder(dir, sizeof(dir));
  if (dir[0] != '\0') {
    snprintf(path, sizeof(path), "%s/%s", dir, HVDS_DEVICE_LIBRARY_NAME);
    if (try_open(path)) return;
    snprintf(path, sizeof(path), "%s/../lib/%s", dir, HVDS_DEVICE_LIBRARY_NAME);
    if (try_open(path)) return;
  }
  try_open(HVDS_DEVICE_LIBRARY_NAME);
}

const hvds_device_api_t* hvds__device_library(char* why, size_t why_len, char* path,
                                              size_t path_len) {
  pthread_once(&once, load);
  if (why != NULL && why_len > 0) snprintf(why, why_len, "%s", api ? "" : failure);
  if (path != NULL && path_len > 0) snprintf(path, path_len, "%s", api ? loaded_path : "");
  return api;
}
