// The CPU allocator: alignment, and the reuse of freed blocks of 2 MiB and more (their pages are
// already faulted in). Sanitizer builds keep no blocks (the sanitizers must see every free).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "runtime/allocator.h"

using namespace tessera;

namespace {

constexpr size_t kMiB = size_t(1) << 20;

TEST(CpuAllocator, LargeBlocksAreReusedBySizeClassSmallOnesAreNot) {
  const auto& a = runtime::allocator_for(DeviceType::CPU);
  runtime::cpu_empty_cache();
  ASSERT_EQ(runtime::cpu_cached_bytes(), 0u);
  void* small = a.allocate(1000, Device("cpu"));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small) % runtime::kCpuAlignment, 0u);
  a.release(small, Device("cpu"));
  EXPECT_EQ(runtime::cpu_cached_bytes(), 0u);
  void* big = a.allocate(3 * kMiB + 5, Device("cpu"));  // the 4 MiB class
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big) % (2 * kMiB), 0u);
  std::memset(big, 7, 3 * kMiB + 5);
  a.release(big, Device("cpu"));
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  EXPECT_EQ(runtime::cpu_cached_bytes(), 0u);
#else
  EXPECT_EQ(runtime::cpu_cached_bytes(), 4 * kMiB);
  void* again = a.allocate(4 * kMiB, Device("cpu"));  // same class: the same block
  EXPECT_EQ(again, big);
  EXPECT_EQ(runtime::cpu_cached_bytes(), 0u);
  void* other = a.allocate(6 * kMiB, Device("cpu"));  // another class: a new block
  EXPECT_NE(other, big);
  a.release(again, Device("cpu"));
  a.release(other, Device("cpu"));
  EXPECT_EQ(runtime::cpu_cached_bytes(), 10 * kMiB);
  runtime::cpu_empty_cache();
  EXPECT_EQ(runtime::cpu_cached_bytes(), 0u);
#endif
}

}  // namespace
