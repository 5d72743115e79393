// hvds__copy: the bytes of memcpy at every distance and length, nothing written outside them,
// and the vector loop taken exactly where memcpy's string copy would stall.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "copy.h"

namespace {

// Copies n bytes from src_off to dst_off of two page-aligned arenas and checks every byte.
void CheckCopy(size_t src_off, size_t dst_off, size_t n) {
  const size_t arena = n + 2 * 4096 + 128;
  std::vector<unsigned char> a(arena + 4096), b(arena + 4096);
  unsigned char* src = a.data() + (4096 - reinterpret_cast<uintptr_t>(a.data()) % 4096);
  unsigned char* dst = b.data() + (4096 - reinterpret_cast<uintptr_t>(b.data()) % 4096);
  for (size_t i = 0; i < arena; i++) {
    src[i] = static_cast<unsigned char>(i * 131 + 7);
    dst[i] = 0xA5;
  }
  hvds__copy(dst + dst_off, src + src_off, n);
  for (size_t i = 0; i < arena; i++) {
    unsigned char want = i >= dst_off && i < dst_off + n ? src[src_off + i - dst_off] : 0xA5;
    ASSERT_EQ(dst[i], want) << "byte " << i << " of a copy of " << n << " bytes from offset "
                            << src_off << " to offset " << dst_off;
  }
}

TEST(Copy, EveryDistanceWithinACacheLinePairAndEveryLengthAroundTheVectorWidth) {
  for (size_t n : {0, 1, 15, 63, 64, 65, 127, 2047, 2048, 2049, 4096 + 13, 8192})
    for (size_t src_off : {0, 16, 4095})
      for (size_t d = 0; d < 130; d++) CheckCopy(src_off, (src_off + d) % 4096, n);
}

TEST(Copy, LargeCopiesAtTheStallingDistanceAndElsewhere) {
  for (size_t n : {size_t(600) << 10, (size_t(1) << 20) + 3})
    for (size_t dst_off : {0, 1, 16, 63, 64, 2048}) CheckCopy(0, dst_off, n);
}

#if defined(__x86_64__)
TEST(Copy, TheVectorLoopRunsOnlyWhereTheStringCopyWouldStall) {
  alignas(4096) static unsigned char page[3 * 4096];
  // dst 1-63 bytes past src (modulo the page), from 2 KiB on: the vector loop.
  EXPECT_TRUE(hvds__copy_avoids_memcpy(page + 4096 + 16, page, 8192));
  EXPECT_TRUE(hvds__copy_avoids_memcpy(page + 4096 + 1, page, 2048));
  EXPECT_TRUE(hvds__copy_avoids_memcpy(page + 63, page + 4096, 1 << 20));
  // Anything else: memcpy.
  EXPECT_FALSE(hvds__copy_avoids_memcpy(page + 4096, page, 8192));       // same offset
  EXPECT_FALSE(hvds__copy_avoids_memcpy(page + 64, page, 8192));         // a line or more
  EXPECT_FALSE(hvds__copy_avoids_memcpy(page, page + 16, 8192));         // dst before src
  EXPECT_FALSE(hvds__copy_avoids_memcpy(page + 4096 + 16, page, 2047));  // short copies
}
#endif

}  // namespace
