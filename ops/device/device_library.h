/* Finding and loading the device library (device_api.h), once per process. */
#ifndef HVDS_OPS_DEVICE_LIBRARY_H_
#define HVDS_OPS_DEVICE_LIBRARY_H_

#include <stddef.h>

#include "device_api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The device library's table, loaded on the first call (thread-safe), or NULL when there is
 * none; then why says what was tried and what failed. Where it is looked for, in order:
 * HVDSPARSE_DEVICE_LIBRARY (a path; nothing else is tried when it is set), the folder of the
 * module calling this (libhvdsparse.so or the launcher), that folder's ../lib, then the dynamic
 * loader's own search (LD_LIBRARY_PATH, the cache). path gets the file loaded; either may be
 * NULL. */
const hvds_device_api_t* hvds__device_library(char* why, size_t why_len, char* path,
                                              size_t path_len);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_OPS_DEVICE_LIBRARY_H_ */
