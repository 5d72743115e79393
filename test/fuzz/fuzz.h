/* Shared by the fuzz targets and the corpus-replay driver: the libFuzzer entry point and a check
 * that aborts (so libFuzzer, ASan and ctest all see a crash) with the failed condition. */
#ifndef HVDS_FUZZ_H_
#define HVDS_FUZZ_H_

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Feeds one input to the target. Returns 0; a failed property aborts. */
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

#define FUZZ_ASSERT(cond)                                                          \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      fprintf(stderr, "%s:%d: fuzz property failed: %s\n", __FILE__, __LINE__, #cond); \
      abort();                                                                     \
    }                                                                              \
  } while (0)

#endif /* HVDS_FUZZ_H_ */
