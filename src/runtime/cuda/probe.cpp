// `tessera::cuda_is_available()` (the seed's `has_triton()`): a driver and at least one GPU.
#include "runtime/cuda/context.h"
#include "runtime/cuda/memory.h"
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

}  // namespace tessera
