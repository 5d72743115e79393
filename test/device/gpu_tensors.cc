// The runtime loads its device library on the first GPU tensor: the fake one, named before any
// test runs (gpu_tensors.h).
#include <stdlib.h>

namespace {
const int kFakeLibrarySet = setenv("HVDSPARSE_DEVICE_LIBRARY", FAKE_LIBRARY_STAGING, 1);
}  // namespace
