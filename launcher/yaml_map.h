/* A reader for the small YAML subset horovodrun's --config-file uses: top-level scalars and
 * sections of scalars, two levels deep.
 *
 *   controller: gloo          # a top-level key: section ""
 *   params:
 *     fusion_threshold_mb: 32
 *     hierarchical_allreduce: false
 *   timeline:
 *     filename: "/tmp/timeline.json"
 *
 * Comments, blank lines and a leading "---" are skipped; values may be plain, 'single' or
 * "double" quoted. Anything else (lists, flow collections, anchors, multi-line values, deeper
 * nesting) is refused with the line it is on, never guessed at. */
#ifndef HVDS_LAUNCHER_YAML_MAP_H_
#define HVDS_LAUNCHER_YAML_MAP_H_

#include <stddef.h>

#include "hvdsparse.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  char section[64]; /* "" for a top-level key */
  char key[64];
  char value[1024]; /* unquoted; "" when is_null */
  int is_null;      /* empty, "~" or "null": YAML's null, i.e. not set */
  int line;         /* 1-based line in the file */
} hvds_yaml_entry_t;

/* Reads path. On success *entries is a malloc'd array of *n entries in file order (the caller
 * frees it); a section header itself is no entry. On error nothing is allocated and err says
 * which line and why (HVDS_INVALID_ARGUMENT), or that the file cannot be read
 * (HVDS_SYSTEM_ERROR). */
hvds_result_t hvds__yaml_map_read(const char* path, hvds_yaml_entry_t** entries /* OUT */,
                                  int* n /* OUT */, char* err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_LAUNCHER_YAML_MAP_H_ */
