// hvds_topk_feedback_device over the fake device library (fake_device_topk.c): the public
// entry's checks, the stream it queues on, the padding of a short selection, and equality with
// the CPU selection (hvds_topk_feedback). The fake selects on host copies, so this proves the
// control flow and the contract; the kernel itself is checked on a GPU (test/gpu).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "gpu_tensors.h"

namespace {

using namespace hvds_test;  // NOLINT: the shared helpers of gpu_tensors.h

TEST(DeviceTopK, EqualsTheCpuSelectionOnTheCallersStream) {
  // Ties (|3| three times), signs, zeros: the rules the CPU and the kernel share.
  std::vector<double> acc = {0, -3, 1, 3, 0.5, -7, 3, 0, 2, -0.25};
  std::vector<double> grad = {1, 0, 0, 0, 0, 0, 0, 0, -2, 0};
  const int64_t n = (int64_t)acc.size(), k = 4;
  DeviceBytes d_acc(acc.data(), n * 8, 1), d_grad(grad.data(), n * 8, 1);
  DeviceBytes d_idx(nullptr, k * 4, 1), d_val(nullptr, k * 8, 1);
  long before = Fake::Get().stats().topk_calls;
  ASSERT_EQ(hvds_topk_feedback_device(1, 4242, d_acc.get(), d_grad.get(), HVDS_FLOAT64, n, k,
                                      d_idx.get(), HVDS_INT32, d_val.get()),
            HVDS_SUCCESS)
      << hvds_last_error();
  EXPECT_EQ(Fake::Get().stats().topk_calls, before + 1);
  EXPECT_EQ(Fake::Get().stats().last_topk_stream, 4242) << "queued on the caller's stream";

  std::vector<int32_t> idx(k);
  std::vector<double> vals(k);
  int64_t count = 0;
  hvds_topk_plan_t plan = {k, 0, 0, 0};
  ASSERT_EQ(hvds_topk_feedback(acc.data(), grad.data(), HVDS_FLOAT64, n, &plan, idx.data(),
                               HVDS_INT32, vals.data(), &count, nullptr),
            HVDS_SUCCESS);
  ASSERT_EQ(count, k);
  EXPECT_EQ(d_idx.Read<int32_t>(), idx);
  EXPECT_EQ(d_val.Read<double>(), vals);
  EXPECT_EQ(d_acc.Read<double>(), acc) << "the residual is the CPU's";
  EXPECT_EQ(idx, (std::vector<int32_t>{1, 3, 5, 6}));
}

TEST(DeviceTopK, AShortSelectionIsPaddedWithIndexZeroAndValueZero) {
  std::vector<float> acc = {0, 0, 5, 0, -1, 0};
  DeviceBytes d_acc(acc.data(), acc.size() * 4, 0);
  std::vector<int64_t> stale(4, 99);
  std::vector<float> stale_vals(4, 99);
  DeviceBytes d_idx(stale.data(), 4 * 8, 0), d_val(stale_vals.data(), 4 * 4, 0);
  ASSERT_EQ(hvds_topk_feedback_device(0, 0, d_acc.get(), nullptr, HVDS_FLOAT32, 6, 4, d_idx.get(),
                                      HVDS_INT64, d_val.get()),
            HVDS_SUCCESS)
      << hvds_last_error();
  EXPECT_EQ(d_idx.Read<int64_t>(), (std::vector<int64_t>{2, 4, 0, 0}));
  EXPECT_EQ(d_val.Read<float>(), (std::vector<float>{5, -1, 0, 0}));
  EXPECT_EQ(d_acc.Read<float>(), std::vector<float>(6, 0.0f));
}

TEST(DeviceTopK, BadArgumentsAreNamedAndChangeNothing) {
  std::vector<float> acc = {1, 2, 3};
  DeviceBytes d_acc(acc.data(), 12, 0), d_idx(nullptr, 8, 0), d_val(nullptr, 8, 0);
  long before = Fake::Get().stats().topk_calls;
  struct Case {
    int32_t device;
    hvds_dtype_t dtype, index_dtype;
    int64_t k;
    void* values;
    const char* says;
  } cases[] = {
      {0, HVDS_FLOAT16, HVDS_INT32, 2, d_val.get(), "dtype FLOAT16 is not supported"},
      {0, HVDS_FLOAT32, HVDS_FLOAT32, 2, d_val.get(), "index dtype must be INT32 or INT64"},
      {0, HVDS_FLOAT32, HVDS_INT32, -1, d_val.get(), "k = -1 is negative"},
      {0, HVDS_FLOAT32, HVDS_INT32, 2, nullptr, "values is NULL"},
      {-1, HVDS_FLOAT32, HVDS_INT32, 2, d_val.get(), "device -1 is not a GPU"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(hvds_topk_feedback_device(c.device, 0, d_acc.get(), nullptr, c.dtype, 3, c.k,
                                        d_idx.get(), c.index_dtype, c.values),
              HVDS_INVALID_ARGUMENT)
        << c.says;
    EXPECT_NE(std::string(hvds_last_error()).find(c.says), std::string::npos) << hvds_last_error();
  }
  EXPECT_EQ(Fake::Get().stats().topk_calls, before);
  EXPECT_EQ(d_acc.Read<float>(), acc);
}

TEST(DeviceTopK, MemoryOfAnotherGpuFailsWithTheLibrarysReason) {
  std::vector<float> acc = {1, 2, 3};
  DeviceBytes d_acc(acc.data(), 12, 1), d_idx(nullptr, 8, 0), d_val(nullptr, 8, 0);
  EXPECT_EQ(hvds_topk_feedback_device(0, 0, d_acc.get(), nullptr, HVDS_FLOAT32, 3, 2, d_idx.get(),
                                      HVDS_INT32, d_val.get()),
            HVDS_SYSTEM_ERROR);
  std::string why = hvds_last_error();
  EXPECT_NE(why.find("on GPU 0"), std::string::npos) << why;
  EXPECT_NE(why.find("acc is not memory of GPU 0"), std::string::npos) << why;
}

}  // namespace
