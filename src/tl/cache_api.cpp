// tessera::cache (include/tessera/cache.h): the CPU and CUDA backends' disk caches as data.
#include "tessera/cache.h"

#include "backend/cpu/toolchain.h"
#include "backend/cuda/cuda_backend.h"
#include "tessera/env.h"

namespace tessera::cache {

std::string root() {
  return knobs().cache_dir;  // cpu/ and cuda/ below it
}

std::vector<Entry> entries() {
  std::vector<Entry> out;
  for (const auto& c : backend::cpu::cache_entries()) {
    Entry e;
    e.key = c.key;
    e.kernel = c.kernel;
    e.target = "cpu";
    e.bytes = c.bytes;
    e.modified = c.mtime;
    out.push_back(std::move(e));
  }
  for (const auto& c : backend::cuda::cache_entries()) {
    Entry e;
    e.key = c.key;
    e.kernel = c.kernel;
    e.target = c.arch;
    e.bytes = c.bytes;
    e.modified = c.mtime;
    e.registers = c.registers;
    e.shared_bytes = c.shared_bytes;
    e.spill_stores = c.spill_stores;
    e.spill_loads = c.spill_loads;
    out.push_back(std::move(e));
  }
  return out;
}

Stats stats() {
  Stats s;
  for (const Entry& e : entries()) {
    ++s.kernels;
    ++(e.target == "cpu" ? s.cpu_kernels : s.cuda_kernels);
    s.bytes += e.bytes;
  }
  return s;
}

size_t clear() {
  return backend::cpu::clear_cache() + backend::cuda::clear_cache();
}

}  // namespace tessera::cache
