/* A stand-in device library for the loader's refusals: FAKE_API_VERSION and FAKE_NCCL_VERSION
 * say what it claims. */
#include "device_api.h"

static int nccl_version(void) { return FAKE_NCCL_VERSION; }
static int cuda_runtime_version(void) { return 12000; }
static int device_count(char* why, size_t why_len) {
  if (why_len > 0) why[0] = '\0';
  return 0;
}

static const hvds_device_api_t table = {FAKE_API_VERSION, nccl_version, cuda_runtime_version,
                                        device_count};

const hvds_device_api_t* hvds_device_api_v1(void) { return &table; }
