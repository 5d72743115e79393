/* The deny list of remote_env.h. */
#include "remote_env.h"

#include <string.h>

/* Exact names that stay behind. */
static const char* const denied[] = {"OLDPWD", "PWD", "SHLVL", "_", "HOSTNAME"};
/* Prefixes and suffixes of names that stay behind. */
static const char* const denied_prefix[] = {"BASH_FUNC_", "SSH_"};
static const char* const denied_suffix[] = {"CUDA_VISIBLE_DEVICES"};

/* [A-Za-z_][A-Za-z0-9_]*: a name `env` on the remote side can set. */
static int is_identifier(const char* s, size_t n) {
  if (n == 0 || (s[0] >= '0' && s[0] <= '9')) return 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
      return 0;
  }
  return 1;
}

int hvds__remote_env_forwards(const char* entry) {
  const char* eq = strchr(entry, '=');
  if (eq == NULL) return 0;
  size_t n = (size_t)(eq - entry);
  if (!is_identifier(entry, n)) return 0;
  for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++)
    if (strlen(denied[i]) == n && strncmp(entry, denied[i], n) == 0) return 0;
  for (size_t i = 0; i < sizeof(denied_prefix) / sizeof(denied_prefix[0]); i++)
    if (strncmp(entry, denied_prefix[i], strlen(denied_prefix[i])) == 0) return 0;
  for (size_t i = 0; i < sizeof(denied_suffix) / sizeof(denied_suffix[0]); i++) {
    size_t m = strlen(denied_suffix[i]);
    if (n >= m && strncmp(entry + n - m, denied_suffix[i], m) == 0) return 0;
  }
  return 1;
}
