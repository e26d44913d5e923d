// `tessera cache ls|stats|clear`: the compiled-kernel cache (CPU shared objects and CUDA cubins).
#include <ctime>
#include <iomanip>
#include <iostream>

#include "backend/cpu/toolchain.h"
#include "backend/cuda/cuda_backend.h"
#include "tools/tessera/commands.h"

namespace tessera::cli {
namespace {

std::string when(std::time_t t) {
  char s[32];
  std::strftime(s, sizeof s, "%Y-%m-%d %H:%M", std::localtime(&t));
  return s;
}

}  // namespace

int cache(const std::string& what) {
  const auto cpu = backend::cpu::cache_entries();
  const auto cuda = backend::cuda::cache_entries();
  if (what == "ls") {
    // key, bytes, time, target, kernel (and a CUDA kernel's registers, shared memory, spills)
    for (const auto& e : cpu) {
      std::cout << e.key.substr(0, 16) << "  " << std::setw(9) << e.bytes << "  " << when(e.mtime)
                << "  " << std::left << std::setw(6) << "cpu" << std::right << "  " << e.kernel
                << "\n";
    }
    for (const auto& e : cuda) {
      std::cout << e.key.substr(0, 16) << "  " << std::setw(9) << e.bytes << "  " << when(e.mtime)
                << "  " << std::left << std::setw(6) << e.arch << std::right << "  " << e.kernel
                << "  (" << e.resources << ")\n";
    }
    return 0;
  }
  if (what == "stats") {
    uint64_t bytes = 0;
    for (const auto& e : cpu) bytes += e.bytes;
    for (const auto& e : cuda) bytes += e.bytes;
    std::cout << "cache: " << backend::cpu::cache_root() << "\n"
              << "kernels: " << cpu.size() + cuda.size() << " (cpu " << cpu.size() << ", cuda "
              << cuda.size() << ")\n"
              << "bytes: " << bytes << "\n";
    return 0;
  }
  if (what == "clear") {
    const size_t n = backend::cpu::clear_cache() + backend::cuda::clear_cache();
    std::cout << "removed " << n << " kernels from " << backend::cpu::cache_root() << "\n";
    return 0;
  }
  std::cerr << "tessera cache: unknown subcommand '" << what << "' (ls, stats, clear)\n";
  return 1;
}

}  // namespace tessera::cli
