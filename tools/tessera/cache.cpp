// `tessera cache ls|stats|clear`: the compiled-kernel cache (CPU shared objects and CUDA cubins),
// through the public tessera::cache API.
#include <ctime>
#include <iomanip>
#include <iostream>

#include "tessera/cache.h"
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
  if (what == "ls") {
    // key, bytes, time, target, kernel (and a CUDA kernel's registers, shared memory, spills)
    for (const auto& e : cache::entries()) {
      std::cout << e.key.substr(0, 16) << "  " << std::setw(9) << e.bytes << "  "
                << when(e.modified) << "  " << std::left << std::setw(6) << e.target << std::right
                << "  " << e.kernel;
      if (e.target != "cpu") {
        std::cout << "  (" << e.registers << " regs, " << e.shared_bytes << " B shared, spills "
                  << e.spill_stores << "/" << e.spill_loads << " B)";
      }
      std::cout << "\n";
    }
    return 0;
  }
  if (what == "stats") {
    const cache::Stats s = cache::stats();
    std::cout << "cache: " << cache::root() << "\n"
              << "kernels: " << s.kernels << " (cpu " << s.cpu_kernels << ", cuda "
              << s.cuda_kernels << ")\n"
              << "bytes: " << s.bytes << "\n";
    return 0;
  }
  if (what == "clear") {
    const size_t n = cache::clear();
    std::cout << "removed " << n << " kernels from " << cache::root() << "\n";
    return 0;
  }
  std::cerr << "tessera cache: unknown subcommand '" << what << "' (ls, stats, clear)\n";
  return 1;
}

}  // namespace tessera::cli
