// GPU support as a build without a GPU can check it: libhvdsparse.so needs neither CUDA nor
// NCCL, the device library is found or its absence explained, hvds_cuda_built/hvds_nccl_built
// say what was loaded, and a GPU tensor is refused with its name and the reason. Each case that
// depends on the loader runs in a child process, since a process loads the library once.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <string>

#include "device_api.h"
#include "fake_device_library.h"
#include "hvdsparse.h"

namespace {

// Runs body in a child with HVDSPARSE_DEVICE_LIBRARY set to library ("" leaves it unset); the
// child's failures come back as its exit status.
void InChild(const std::string& library, const std::function<void()>& body) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (!library.empty()) setenv("HVDSPARSE_DEVICE_LIBRARY", library.c_str(), 1);
    body();
    _exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child's checks failed";
}

std::string Output(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while (p != nullptr && (n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  if (p != nullptr) pclose(p);
  return out;
}

// The error an allreduce of a one-element float tensor "on GPU 0" (host memory, which no device
// library takes for GPU memory) gets, at size 1.
std::string DeviceTensorError() {
  EXPECT_EQ(hvds_init(), HVDS_SUCCESS) << hvds_last_error();
  float v = 1;
  hvds_tensor_t t = {&v, HVDS_FLOAT32, 0, 1, {1}};
  hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
  o.name = "grad.fc1";
  hvds_handle_t h;
  EXPECT_NE(hvds_allreduce_async(&t, &t, &o, &h), HVDS_SUCCESS);
  std::string err = hvds_last_error();
  EXPECT_EQ(hvds_shutdown(), HVDS_SUCCESS);
  return err;
}

}  // namespace

TEST(DeviceLibrary, TheRuntimeAndTheLauncherNeedNeitherCudaNorNccl) {
  for (const char* file : {HVDS_RUNTIME_LIBRARY, HVDS_LAUNCHER}) {
    std::string needed = Output(std::string("readelf -d ") + file + " 2>&1");
    ASSERT_NE(needed.find("NEEDED"), std::string::npos) << needed;
    EXPECT_EQ(needed.find("cuda"), std::string::npos) << file << "\n" << needed;
    EXPECT_EQ(needed.find("nccl"), std::string::npos) << file << "\n" << needed;
  }
}

TEST(DeviceLibrary, BuiltFlagsSayWhatWasLoaded) {
  InChild("", [] {
#if HVDS_DEVICE_LIBRARY_BUILT
    EXPECT_EQ(hvds_cuda_built(), 1);
    EXPECT_GE(hvds_nccl_built(), HVDS_DEVICE_MIN_NCCL_VERSION);
    // Staged, and refused by the CUDA runtime: no GPU here, and the memory is not a GPU's.
    EXPECT_NE(DeviceTensorError().find("'grad.fc1' on rank 0: "), std::string::npos);
#else
    EXPECT_EQ(hvds_cuda_built(), 0);
    EXPECT_EQ(hvds_nccl_built(), 0);
#endif
  });
}

// What each library makes of the built flags and of a GPU tensor's error.
struct LoadCase {
  const char* what;
  const char* library;  // HVDSPARSE_DEVICE_LIBRARY
  int cuda_built, nccl_built;
  std::string error;  // a part of the GPU tensor's error
};

TEST(DeviceLibrary, EachLibraryIsTakenOrRefusedWithItsReason) {
  const LoadCase cases[] = {
      {"missing", "/nonexistent/libhvdsparse_device.so", 0, 0,
       "tensor 'grad.fc1' is on device 0, but this installation has no GPU support "
       "(/nonexistent/libhvdsparse_device.so: cannot open"},
      {"another interface version", FAKE_LIBRARY_OTHER_VERSION, 0, 0,
       "not a device library of this version (interface 99, want " +
           std::to_string(HVDS_DEVICE_API_VERSION) + ")"},
      {"NCCL too old", FAKE_LIBRARY_OLD_NCCL, 0, 0,
       "the NCCL it resolved is version 21000, older than 21400"},
      {"taken", FAKE_LIBRARY_GOOD, 1, 22809,
       "Allreduce 'grad.fc1' on rank 0: copying the tensor from GPU 0 to host memory failed "
       "(fake cudaMemcpyAsync: invalid argument: not GPU memory of this process)"},
  };
  for (const LoadCase& c : cases) {
    SCOPED_TRACE(c.what);
    InChild(c.library, [&c] {
      EXPECT_EQ(hvds_cuda_built(), c.cuda_built);
      EXPECT_EQ(hvds_nccl_built(), c.nccl_built);
      std::string err = DeviceTensorError();
      EXPECT_NE(err.find(c.error), std::string::npos) << err;
    });
  }
}

// The GPU top-k and the route need the library: without it the first is refused with the
// reason and the second is reported off whatever HVDSPARSE_GPU_OPERATIONS says.
TEST(DeviceLibrary, TopKOnAGpuAndTheRouteNeedTheLibrary) {
  InChild("/nonexistent/libhvdsparse_device.so", [] {
    setenv("HVDSPARSE_GPU_OPERATIONS", "nccl", 1);
    EXPECT_EQ(hvds_gpu_operations_routed(), 0);
    float acc[4] = {1, 2, 3, 4}, vals[2];
    int32_t idx[2];
    EXPECT_EQ(
        hvds_topk_feedback_device(0, 0, acc, nullptr, HVDS_FLOAT32, 4, 2, idx, HVDS_INT32, vals),
        HVDS_NOT_SUPPORTED);
    std::string err = hvds_last_error();
    EXPECT_NE(err.find("hvds_topk_feedback_device: no device library: "
                       "/nonexistent/libhvdsparse_device.so"),
              std::string::npos)
        << err;
    EXPECT_EQ(acc[3], 4) << "nothing changed";
  });
  for (const char* mode : {"nccl", "host"})  // a child each: the knob is read once
    InChild(FAKE_LIBRARY_GOOD, [mode] {
      setenv("HVDSPARSE_GPU_OPERATIONS", mode, 1);
      EXPECT_EQ(hvds_gpu_operations_routed(), std::string(mode) == "nccl") << mode;
    });
}

// The quantizer: host memory needs nothing, a GPU needs the library.
TEST(DeviceLibrary, TheQuantizerOnAGpuNeedsTheLibrary) {
  InChild("/nonexistent/libhvdsparse_device.so", [] {
    float v[4] = {1, -2, 3, -4};
    uint8_t q[16];
    memset(q, 0xAB, sizeof q);
    EXPECT_EQ(hvds_quantize(0, 0, v, 4, HVDS_FLOAT32, 8, 1, q), HVDS_NOT_SUPPORTED);
    std::string err = hvds_last_error();
    EXPECT_NE(err.find("hvds_quantize on GPU 0: no device library: "
                       "/nonexistent/libhvdsparse_device.so"),
              std::string::npos)
        << err;
    EXPECT_EQ(q[0], 0xAB) << "nothing written";
    EXPECT_EQ(hvds_dequantize(0, 0, q, 4, 8, HVDS_FLOAT32, v), HVDS_NOT_SUPPORTED);
    EXPECT_EQ(v[3], -4) << "nothing written";
    ASSERT_EQ(hvds_quantize(-1, 0, v, 4, HVDS_FLOAT32, 8, 1, q), HVDS_SUCCESS) << hvds_last_error();
    float back[4];
    ASSERT_EQ(hvds_dequantize(-1, 0, q, 4, 8, HVDS_FLOAT32, back), HVDS_SUCCESS);
    EXPECT_EQ(back[3], -4) << "the bucket's max is on the grid";
  });
}

// hvds_device_synchronize: the CPU needs nothing, a GPU needs the library, which waits on that
// GPU.
TEST(DeviceLibrary, SynchronizeWaitsOnTheGpuItNames) {
  InChild("/nonexistent/libhvdsparse_device.so", [] {
    EXPECT_EQ(hvds_device_synchronize(-1), HVDS_SUCCESS);
    EXPECT_EQ(hvds_device_synchronize(0), HVDS_NOT_SUPPORTED);
    EXPECT_NE(std::string(hvds_last_error()).find("hvds_device_synchronize: no device library"),
              std::string::npos)
        << hvds_last_error();
  });
  InChild(FAKE_LIBRARY_GOOD, [] {
    EXPECT_EQ(hvds_device_synchronize(3), HVDS_SUCCESS) << hvds_last_error();
    void* lib = dlopen(FAKE_LIBRARY_GOOD, RTLD_NOW | RTLD_NOLOAD);
    ASSERT_NE(lib, nullptr) << "the runtime loaded the fake";
    auto stats = (fake_device_stats_fn)dlsym(lib, "fake_device_stats");
    EXPECT_EQ(stats().synchronizes, 1);
    EXPECT_EQ(stats().last_synchronized_device, 3);
  });
}

// The framework imports are skipped (HVDSPARSE_PYTHON that fails at once): only the device
// line is checked here.
TEST(DeviceLibrary, CheckBuildSaysWhatItFound) {
  const std::string quick = "HVDSPARSE_PYTHON=/bin/false ";
  std::string out = Output(quick + "HVDSPARSE_DEVICE_LIBRARY=" + FAKE_LIBRARY_GOOD + " " +
                           HVDS_LAUNCHER + " --check-build 2>&1");
  EXPECT_NE(out.find("[X] device library: "), std::string::npos) << out;
  EXPECT_NE(out.find("(NCCL 2.28.9, CUDA runtime 12.0, 0 GPUs)"), std::string::npos) << out;
  out = Output(quick + "HVDSPARSE_DEVICE_LIBRARY=/nonexistent.so " + HVDS_LAUNCHER +
               " --check-build 2>&1");
  EXPECT_NE(out.find("[ ] device library (/nonexistent.so: cannot open"), std::string::npos) << out;
#if HVDS_DEVICE_LIBRARY_BUILT
  // The launcher links no libhvdsparse: the library this build made loads on its own (it once
  // needed two of libhvdsparse's exports and was reported missing here).
  out = Output(quick + "HVDSPARSE_DEVICE_LIBRARY=" + HVDS_DEVICE_LIBRARY_FILE + " " +
               HVDS_LAUNCHER + " --check-build 2>&1");
  EXPECT_NE(out.find(std::string("[X] device library: ") + HVDS_DEVICE_LIBRARY_FILE),
            std::string::npos)
      << out;
  std::string undefined =
      Output(std::string("nm -D --undefined-only ") + HVDS_DEVICE_LIBRARY_FILE + " 2>&1");
  EXPECT_EQ(undefined.find("hvds"), std::string::npos) << undefined;
#endif
}
