#include "runtime/allocator.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "tessera/error.h"

namespace tessera::runtime {
namespace {

void release_cached_blocks();

// Buffers of at least this size start on a 2 MiB boundary and ask for transparent huge pages
// (where the system's policy is `madvise`): streaming through them then takes 512x fewer TLB
// misses, worth 10-35% of memory bandwidth on the 2-core machine (docs/decisions.md).
constexpr size_t kHugePage = size_t(2) << 20;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kCacheBlocks = false;  // the sanitizers must see every free and reuse
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kCacheBlocks = false;
#else
constexpr bool kCacheBlocks = true;
#endif
#else
constexpr bool kCacheBlocks = true;
#endif

// Freed blocks of at least 2 MiB are kept for reuse (size classes of 2 MiB, up to kCacheCap
// bytes held): a fresh block's pages fault in on first touch, which cost 4-5x the work of
// streaming through them (a 16 MiB add: 1126 us into a new tensor, 223 us into an existing one,
// on the 2-core machine). glibc returns such blocks to the system on every free.
constexpr size_t kCacheCap = size_t(1) << 30;

struct BlockCache {
  std::mutex mutex;
  std::unordered_map<void*, size_t> sizes;              // live and cached large blocks
  std::unordered_map<size_t, std::vector<void*>> free;  // by size class
  size_t cached = 0;
};

BlockCache& cache() {
  static BlockCache* c = new BlockCache;  // never destroyed: tensors may die after static exit
  return *c;
}

// What the machine has: `MemAvailable` and `MemTotal` of /proc/meminfo where there is one.
std::string describe_cpu_memory() {
  uint64_t available = 0, total = 0;
  if (std::FILE* f = std::fopen("/proc/meminfo", "r")) {
    char key[64];
    unsigned long long kib = 0;
    while (std::fscanf(f, "%63s %llu kB", key, &kib) == 2) {
      if (std::strcmp(key, "MemAvailable:") == 0) available = kib * 1024;
      if (std::strcmp(key, "MemTotal:") == 0) total = kib * 1024;
    }
    std::fclose(f);
  }
  if (total == 0) return "the machine's free memory is unknown";
  return "the machine has " + format_bytes(available) + " available of " + format_bytes(total);
}

void* cpu_allocate(size_t nbytes, Device) {
  if (nbytes == 0) return nullptr;
  const bool huge = nbytes >= kHugePage;
  if (huge) nbytes = (nbytes + kHugePage - 1) / kHugePage * kHugePage;
  if (huge && kCacheBlocks) {
    BlockCache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.free.find(nbytes);
    if (it != c.free.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      c.cached -= nbytes;
      return p;
    }
  }
  void* p = nullptr;
  auto fresh = [&] {
    return posix_memalign(&p, huge ? kHugePage : kCpuAlignment, nbytes) == 0 && p != nullptr;
  };
  // On failure, the cached blocks go back to the system and the allocation is tried once more.
  if (!fresh()) {
    const size_t held = cpu_cached_bytes();
    if (!(huge && kCacheBlocks && (release_cached_blocks(), fresh()))) {
      TS_ERROR(OutOfMemoryError) << "out of CPU memory: tried to allocate " << format_bytes(nbytes)
                                 << " (" << nbytes << " bytes); " << describe_cpu_memory()
                                 << "; tessera's allocator held " << format_bytes(held)
                                 << " of freed blocks, given back before trying again";
    }
  }
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (huge) ::madvise(p, nbytes, MADV_HUGEPAGE);  // advice only: failure changes nothing
#endif
  if (huge && kCacheBlocks) {
    BlockCache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    c.sizes[p] = nbytes;
  }
  return p;
}

void cpu_release(void* p, Device) {
  if (kCacheBlocks && p) {
    BlockCache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.sizes.find(p);
    if (it != c.sizes.end()) {
      if (c.cached + it->second <= kCacheCap) {
        c.free[it->second].push_back(p);
        c.cached += it->second;
        return;
      }
      c.sizes.erase(it);
    }
  }
  std::free(p);
}

Allocator* table() {
  static Allocator t[kNumDeviceTypes] = {Allocator{cpu_allocate, cpu_release}, {}, {}};
  return t;
}

void release_cached_blocks() {
  BlockCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  for (auto& [size, blocks] : c.free) {
    for (void* p : blocks) {
      c.sizes.erase(p);
      std::free(p);
    }
  }
  c.free.clear();
  c.cached = 0;
}

}  // namespace

void cpu_empty_cache() {
  if (kCacheBlocks) release_cached_blocks();
}

size_t cpu_cached_bytes() {
  if (!kCacheBlocks) return 0;
  BlockCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.cached;
}

const Allocator& allocator_for(DeviceType type) {
  const Allocator& a = table()[static_cast<int>(type)];
  TS_CHECK(a.allocate != nullptr, DeviceError)
      << "no memory allocator for device type '" << device_type_name(type) << "'"
      << (type == DeviceType::CUDA ? " (the CUDA backend is not available in this build yet)" : "");
  return a;
}

void register_allocator(DeviceType type, Allocator a) {
  table()[static_cast<int>(type)] = a;
}

std::string format_bytes(uint64_t n) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (n < 1024) return std::to_string(n) + " B";
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f %s", v, kUnits[u]);
  return buf;
}

}  // namespace tessera::runtime
