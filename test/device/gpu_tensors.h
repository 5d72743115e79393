// What the GPU-tensor tests share: the fake device library's functions, tensors in its "GPU
// memory", an allocator of it, and the enqueue and completion steps of ranks as threads.
#ifndef HVDS_TEST_GPU_TENSORS_H_
#define HVDS_TEST_GPU_TENSORS_H_

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <vector>

#include "enqueue.h"
#include "fake_device_library.h"
#include "handle.h"
#include "instance_ranks.h"

namespace hvds_test {

// The fake library's test functions, from the copy the runtime loads (the same file).
struct Fake {
  fake_device_alloc_fn alloc;
  fake_device_free_fn free;
  fake_device_write_fn write;
  fake_device_read_fn read;
  fake_device_stats_fn stats;
  fake_device_fail_copies_fn fail_copies;
  fake_device_route_stats_fn route_stats;
  fake_device_hold_fn hold;
  fake_device_fail_route_fn fail_route;

  static const Fake& Get() {
    static Fake f = [] {
      void* lib = dlopen(FAKE_LIBRARY_STAGING, RTLD_NOW | RTLD_LOCAL);
      EXPECT_NE(lib, nullptr) << dlerror();
      Fake x;
      x.alloc = (fake_device_alloc_fn)dlsym(lib, "fake_device_alloc");
      x.free = (fake_device_free_fn)dlsym(lib, "fake_device_free");
      x.write = (fake_device_write_fn)dlsym(lib, "fake_device_write");
      x.read = (fake_device_read_fn)dlsym(lib, "fake_device_read");
      x.stats = (fake_device_stats_fn)dlsym(lib, "fake_device_stats");
      x.fail_copies = (fake_device_fail_copies_fn)dlsym(lib, "fake_device_fail_copies");
      x.route_stats = (fake_device_route_stats_fn)dlsym(lib, "fake_device_route_stats");
      x.hold = (fake_device_hold_fn)dlsym(lib, "fake_device_hold");
      x.fail_route = (fake_device_fail_route_fn)dlsym(lib, "fake_device_fail_route");
      return x;
    }();
    return f;
  }
};

// Bytes in the fake GPU memory of device, freed with this.
class DeviceBytes {
 public:
  DeviceBytes(const void* host, size_t bytes, int device) : bytes_(bytes) {
    p_ = Fake::Get().alloc(bytes, device);
    if (host != nullptr) Fake::Get().write(p_, host, bytes);
  }
  ~DeviceBytes() { Fake::Get().free(p_); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  void* get() const { return p_; }
  template <class T>
  std::vector<T> Read() const {
    std::vector<T> v(bytes_ / sizeof(T));
    Fake::Get().read(v.data(), p_, bytes_);
    return v;
  }

 private:
  size_t bytes_;
  void* p_;
};

// A float32 tensor in the fake GPU memory of device.
class DeviceTensor {
 public:
  DeviceTensor(const std::vector<float>& v, int device, std::vector<int64_t> shape = {})
      : n_(v.size()),
        device_(device),
        shape_(shape.empty() ? std::vector<int64_t>{(int64_t)n_} : shape) {
    p_ = Fake::Get().alloc(n_ * sizeof(float), device);
    Fake::Get().write(p_, v.data(), n_ * sizeof(float));
  }
  ~DeviceTensor() { Fake::Get().free(p_); }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;

  hvds_tensor_t View() const {
    hvds_tensor_t t = {};
    t.data = p_;
    t.dtype = HVDS_FLOAT32;
    t.device = device_;
    t.ndim = (int32_t)shape_.size();
    for (size_t d = 0; d < shape_.size(); d++) t.shape[d] = shape_[d];
    return t;
  }
  std::vector<float> Read() const { return ReadAt(p_, n_); }
  static std::vector<float> ReadAt(const void* p, size_t n) {
    std::vector<float> v(n);
    Fake::Get().read(v.data(), p, n * sizeof(float));
    return v;
  }

 private:
  size_t n_;
  int device_;
  std::vector<int64_t> shape_;
  void* p_;
};

// The caller's allocator for outputs of negotiated size: GPU memory of its device, freed with it.
struct GpuAllocator {
  int device;
  std::vector<void*> given;
  ~GpuAllocator() {
    for (void* p : given) Fake::Get().free(p);
  }
  static void* Alloc(void* ctx, hvds_dtype_t, int32_t, const int64_t*, size_t bytes) {
    auto* a = static_cast<GpuAllocator*>(ctx);
    void* p = Fake::Get().alloc(bytes, a->device);
    a->given.push_back(p);
    return p;
  }
  void Use(hvds_op_options_t& o) {
    o.alloc = Alloc;
    o.alloc_ctx = this;
  }
};

inline hvds_handle_t Enqueue(hvds_runtime_t* rt, int32_t type, const char* name,
                             const hvds_tensor_t& in, hvds_tensor_t* out,
                             hvds_op_options_t o = HVDS_OP_OPTIONS_INIT) {
  o.name = name;
  hvds_handle_t h = 0;
  EXPECT_EQ(hvds__enqueue(rt, type, hvds__msg_type_name(type), 1, &in, out, &o, &h), HVDS_SUCCESS)
      << name << ": " << hvds_last_error();
  return h;
}

// Cycles until h is done on every rank; its status must be success.
inline void Finish(InstanceRanks& ranks, hvds_runtime_t* rt, hvds_handle_t h, const char* name) {
  ranks.CycleUntil(rt, [&] { return Peek(rt, h).status != HVDS_IN_PROGRESS; });
  EXPECT_EQ(Peek(rt, h).status, HVDS_SUCCESS) << name << ": " << Peek(rt, h).message;
}

// Output 0 of a finished handle: (GPU memory, device, elements).
inline hvds_tensor_t Output(hvds_runtime_t* rt, hvds_handle_t h) {
  pthread_mutex_lock(&rt->hmu);
  hvds_tensor_t t = hvds__handle_find_locked(rt, h)->outputs[0];
  pthread_mutex_unlock(&rt->hmu);
  return t;
}

// An alltoall's received splits, from its finished handle.
inline std::vector<int32_t> RecvSplits(hvds_runtime_t* rt, hvds_handle_t h) {
  pthread_mutex_lock(&rt->hmu);
  hvds_handle_rec_t* rec = hvds__handle_find_locked(rt, h);
  std::vector<int32_t> splits(rec->recv_splits, rec->recv_splits + rec->nrecv_splits);
  pthread_mutex_unlock(&rt->hmu);
  return splits;
}

inline size_t Elements(const hvds_tensor_t& t) {
  size_t n = 1;
  for (int32_t d = 0; d < t.ndim; d++) n *= (size_t)t.shape[d];
  return n;
}

}  // namespace hvds_test

#endif  // HVDS_TEST_GPU_TENSORS_H_
