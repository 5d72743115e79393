// The per-thread buffer pool: large freed buffers come back for requests they fit, small ones
// and oversized requests go to malloc, the kept total stays bounded, and each thread has its own.
#include "sparse_pool.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

namespace {
const size_t kBig = size_t{1} << 20;
}

TEST(SparsePool, LargeBuffersAreReusedSmallOnesAreNot) {
  std::thread([] {  // a fresh thread: an empty pool
    EXPECT_EQ(hvds__sparse_buf_kept(), 0u);
    void* a = hvds__sparse_buf_alloc(kBig);
    ASSERT_NE(a, nullptr);
    memset(a, 1, kBig);
    hvds__sparse_buf_free(a);
    EXPECT_GE(hvds__sparse_buf_kept(), kBig);
    void* b = hvds__sparse_buf_alloc(kBig - 100);  // fits: the same block
    EXPECT_EQ(b, a);
    EXPECT_EQ(hvds__sparse_buf_kept(), 0u);
    hvds__sparse_buf_free(b);
    void* c = hvds__sparse_buf_alloc(kBig / 4);  // would waste more than half: a new block
    EXPECT_NE(c, b);
    void* d = hvds__sparse_buf_alloc(4 * kBig);  // too small to serve
    EXPECT_NE(d, b);
    void* small = hvds__sparse_buf_alloc(100);
    hvds__sparse_buf_free(small);
    size_t kept = hvds__sparse_buf_kept();
    EXPECT_GE(kept, kBig);
    EXPECT_LT(kept, 2 * kBig);  // the 100-byte block was not kept
    hvds__sparse_buf_free(c);
    hvds__sparse_buf_free(d);
    hvds__sparse_buf_free(nullptr);
    void* z = hvds__sparse_buf_alloc(0);
    ASSERT_NE(z, nullptr);
    free(z);  // a pool block may be released with free() too
  }).join();
}

TEST(SparsePool, KeptBytesAreBoundedAndPerThread) {
  std::thread([] {
    std::vector<void*> bufs;
    for (int i = 0; i < 12; i++) bufs.push_back(hvds__sparse_buf_alloc(16 * kBig));
    for (void* p : bufs) hvds__sparse_buf_free(p);
    EXPECT_LE(hvds__sparse_buf_kept(), size_t{128} << 20);
    EXPECT_GE(hvds__sparse_buf_kept(), 7 * 16 * kBig);  // 8 slots, 128 MiB
    std::thread([] { EXPECT_EQ(hvds__sparse_buf_kept(), 0u); }).join();
    // Larger buffers replace the smallest kept ones when the slots are full.
    void* big = hvds__sparse_buf_alloc(20 * kBig);
    hvds__sparse_buf_free(big);
    void* again = hvds__sparse_buf_alloc(20 * kBig);
    EXPECT_EQ(again, big);
    free(again);
  }).join();  // the thread's kept buffers are freed at its exit (LeakSanitizer checks)
}
