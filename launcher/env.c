/* The single place where the launcher reads its environment directly. */
#include "env.h"

#include <stdlib.h>

extern char** environ;

const char* hvds__launcher_getenv(const char* name) { return getenv(name); }

char** hvds__launcher_environ(void) { return environ; }
