/* --keep-freed-memory: the workers' glibc malloc keeps freed memory for reuse.
 *
 * CPU training allocates and frees its large tensors (gradients, activations, an embedding's
 * dense gradient) every step. glibc serves blocks above its mmap threshold (128 KiB, rising to at
 * most 32 MiB) with mmap and unmaps them on free, so every step the kernel faults the pages in
 * again and zeroes them. With mmap off and trimming disabled the blocks come from the heap and
 * are reused as they are. */
#include "malloc_env.h"

#include "env.h"

static const char* const kNames[] = {"MALLOC_MMAP_MAX_", "MALLOC_TRIM_THRESHOLD_"};
static const char* const kValues[] = {"0", "17179869184"};  // no mmap; trim above 16 GiB only

hvds_result_t hvds__malloc_env(hvds_env_list_t* env) {
  for (int i = 0; i < 2; i++) {
    if (hvds__env_list_get(env, kNames[i]) != NULL) continue;  // -x set it
    const char* mine = hvds__launcher_getenv(kNames[i]);       // the user's setting wins
    hvds_result_t rc = hvds__env_list_set(env, kNames[i], mine ? mine : kValues[i]);
    if (rc != HVDS_SUCCESS) return rc;
  }
  return HVDS_SUCCESS;
}
