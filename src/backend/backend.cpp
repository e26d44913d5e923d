// Backend selection and the target digest.
#include "backend/backend.h"

#include "backend/cuda/cuda_backend.h"

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

size_t pack_slots(ArrayRef<Arg> args, trt::Arg* slots) {
  for (size_t i = 0; i < args.size(); ++i) {
    switch (args[i].kind) {
      case ir::ParamKind::Pointer:
        slots[i].p = args[i].ptr;
        break;
      case ir::ParamKind::Int:
        slots[i].i = args[i].i;
        break;
      case ir::ParamKind::Float:
        slots[i].f = args[i].f;
        break;
      case ir::ParamKind::Constexpr:
        slots[i].i = 0;
        break;
    }
  }
  return args.size();
}

const Backend& for_device(Device device) {
  if (device.is_cuda()) {
    TS_CHECK(!knobs().interpret, NotImplementedError)
        << "TESSERA_INTERPRET=1 runs kernels on CPU tensors only (got a tensor on " << device.str()
        << "): move the arguments with .cpu() to interpret the kernel";
    return cuda::backend_for(device.index() < 0 ? 0 : device.index());
  }
  TS_CHECK(device.is_cpu(), NotImplementedError) << "no backend runs kernels on " << device.str();
  const Knobs& k = knobs();
  if (k.interpret) return interp_backend();
  if (!k.crosscheck.empty()) return cuda::crosscheck_backend(k.crosscheck);
  return cpu_backend();
}

}  // namespace tessera::backend
