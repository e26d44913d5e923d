#include "runtime/allocator.h"

#include <cstdlib>
#include <new>

#include "tessera/error.h"

namespace tessera::runtime {
namespace {

void* cpu_allocate(size_t nbytes, Device) {
  if (nbytes == 0) return nullptr;
  void* p = nullptr;
  if (posix_memalign(&p, kCpuAlignment, nbytes) != 0 || p == nullptr) {
    TS_ERROR(RuntimeError) << "out of CPU memory allocating " << nbytes << " bytes";
  }
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
