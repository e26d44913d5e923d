// Backend selection and the target digest.
#include "backend/backend.h"

#include "tessera/detail/hash.h"
#include "tessera/env.h"

namespace tessera::backend {

uint64_t Backend::compute_hash() const {
  const std::string& k = target_key();
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a: a stable 64-bit digest for in-memory keys
  for (char c : k) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  h |= 1;  // never 0 (0 marks "not computed")
  hash_.store(h, std::memory_order_relaxed);
  return h;
}

const Backend& for_device(Device device) {
  TS_CHECK(device.is_cpu(), NotImplementedError)
      << "kernels run on the CPU until the CUDA code generator lands (got a tensor on "
      << device.str() << ")";
  return knobs().interpret ? interp_backend() : cpu_backend();
}

}  // namespace tessera::backend
