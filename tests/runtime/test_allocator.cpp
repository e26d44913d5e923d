// The CPU allocator: alignment, and the reuse of freed blocks of 2 MiB and more (their pages are
// already faulted in). Sanitizer builds keep no blocks (the sanitizers must see every free).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "runtime/allocator.h"
#include "tessera/ops.h"
#include "testing.h"

using namespace tessera;
using tessera::testing::error_of;

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

// A tensor larger than the machine: an OutOfMemoryError (a RuntimeError) naming the size and what
// the machine has, after the allocator gave back the blocks it kept; nothing leaks, and the
// next allocation works.
TEST(CpuAllocator, ATensorTooLargeIsAnOutOfMemoryErrorNamingTheSize) {
  runtime::cpu_empty_cache();
  {
    Tensor keep = empty({int64_t{3} << 20});
  }  // 12 MiB freed into the cache (not in sanitizer builds)
  const size_t held = runtime::cpu_cached_bytes();
  const std::string msg = error_of<OutOfMemoryError>([] { (void)empty({int64_t{1} << 45}); });
  EXPECT_NE(msg.find("out of CPU memory: tried to allocate 128.00 TiB (140737488355328 bytes)"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("available of"), std::string::npos) << msg;
  EXPECT_NE(msg.find("held " + runtime::format_bytes(held) + " of freed blocks"), std::string::npos)
      << msg;
  EXPECT_EQ(runtime::cpu_cached_bytes(), 0u);  // given back before the second try
  EXPECT_NE(error_of<RuntimeError>([] { (void)empty({int64_t{1} << 45}); }), "");
  Tensor after = ones({1000});
  EXPECT_EQ(after.sum().item<float>(), 1000.0f);
  EXPECT_EQ(runtime::format_bytes(512), "512 B");
  EXPECT_EQ(runtime::format_bytes(3584 * 1024), "3.50 MiB");
}

}  // namespace
