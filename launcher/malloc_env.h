/* The workers' malloc settings under --keep-freed-memory. */
#ifndef HVDS_LAUNCHER_MALLOC_ENV_H_
#define HVDS_LAUNCHER_MALLOC_ENV_H_

#include "run_args.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Adds MALLOC_MMAP_MAX_=0 and a trim threshold of 16 GiB to env, so that glibc's malloc reuses
 * freed blocks instead of unmapping them. A variable already in env (-x) or in the launcher's
 * environment keeps that value. */
hvds_result_t hvds__malloc_env(hvds_env_list_t* env);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_LAUNCHER_MALLOC_ENV_H_ */
