#include "runtime/allocator.h"

#include <cstdlib>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "tessera/error.h"

namespace tessera::runtime {
namespace {

// Buffers of at least this size start on a 2 MiB boundary and ask for transparent huge pages
// (where the system's policy is `madvise`): streaming through them then takes 512x fewer TLB
// misses, worth 10-35% of memory bandwidth on the 2-core machine (docs/decisions.md).
constexpr size_t kHugePage = size_t(2) << 20;

void* cpu_allocate(size_t nbytes, Device) {
  if (nbytes == 0) return nullptr;
  void* p = nullptr;
  const bool huge = nbytes >= kHugePage;
  if (posix_memalign(&p, huge ? kHugePage : kCpuAlignment, nbytes) != 0 || p == nullptr) {
    TS_ERROR(RuntimeError) << "out of CPU memory allocating " << nbytes << " bytes";
  }
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (huge) ::madvise(p, nbytes, MADV_HUGEPAGE);  // advice only: failure changes nothing
#endif
  return p;
}

void cpu_release(void* p, Device) {
  std::free(p);
}

Allocator* table() {
  static Allocator t[kNumDeviceTypes] = {Allocator{cpu_allocate, cpu_release}, {}, {}};
  return t;
}

}  // namespace

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

}  // namespace tessera::runtime
