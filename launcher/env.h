/* The launcher's only window on its own environment. Runtime knobs are read through
 * runtime/param.h; everything else (variables forwarded with -x, the inherited environment
 * passed to workers) goes through these two functions, so getenv appears in one file. */
#ifndef HVDS_LAUNCHER_ENV_H_
#define HVDS_LAUNCHER_ENV_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The value of name in the launcher's environment, or NULL. The string belongs to the
 * environment; copy it before changing the environment. */
const char* hvds__launcher_getenv(const char* name);
/* The launcher's environment as a NULL-terminated "NAME=value" array (not a copy). */
char** hvds__launcher_environ(void);
/* The directory of the launcher's executable, or "" when /proc/self/exe cannot be read. */
void hvds__launcher_exe_dir(char* out, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_LAUNCHER_ENV_H_ */
