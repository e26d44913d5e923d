// `tessera::cuda_is_available()` (the seed's `has_triton()`): a driver and at least one GPU.
#include <fstream>
#include <string>

#include "runtime/cuda/context.h"
#include "runtime/cuda/memory.h"
#include "runtime/thread_pool.h"
#include "tessera/device.h"
#include "tessera/error.h"
#include "tessera/version.h"

namespace tessera {

namespace {
// CUDA tensors allocate through the caching allocator (registering touches no driver).
[[maybe_unused]] const bool kAllocatorRegistered = [] {
  runtime::cuda::register_tensor_allocator();
  return true;
}();
}  // namespace

bool cuda_is_available() {
  static const bool available = runtime::cuda::device_count() > 0;
  return available;
}

DeviceProperties get_device_properties(Device device) {
  DeviceProperties p;
  if (device.is_cpu()) {
    std::ifstream f("/proc/cpuinfo");
    std::string line;
    while (std::getline(f, line)) {
      if (line.rfind("model name", 0) == 0) {
        p.name = line.substr(line.find(':') + 2);
        break;
      }
    }
    if (p.name.empty()) p.name = "cpu";
    p.multi_processor_count = runtime::num_threads();
    return p;
  }
  TS_CHECK(device.is_cuda(), DeviceError) << "get_device_properties of " << device;
  const runtime::cuda::DeviceInfo& d =
      runtime::cuda::device_info(device.index() < 0 ? 0 : device.index());
  p.name = d.name;
  p.multi_processor_count = d.multiprocessors;
  p.major = d.major;
  p.minor = d.minor;
  p.total_memory = d.total_memory;
  return p;
}

}  // namespace tessera
