// `tessera cache ls|stats|clear`: the compiled-kernel cache.
#include <ctime>
#include <iomanip>
#include <iostream>

#include "backend/cpu/toolchain.h"
#include "tools/tessera/commands.h"

namespace tessera::cli {

int cache(const std::string& what) {
  const auto entries = backend::cpu::cache_entries();
  if (what == "ls") {
    for (const auto& e : entries) {
      char when[32];
      std::strftime(when, sizeof when, "%Y-%m-%d %H:%M", std::localtime(&e.mtime));
      std::cout << e.key.substr(0, 16) << "  " << std::setw(9) << e.bytes << "  " << when << "  "
                << e.kernel << "\n";
    }
    return 0;
  }
  if (what == "stats") {
    uint64_t bytes = 0;
    for (const auto& e : entries) bytes += e.bytes;
    std::cout << "cache: " << backend::cpu::cache_root() << "\n"
              << "kernels: " << entries.size() << "\n"
              << "bytes: " << bytes << "\n";
    return 0;
  }
  if (what == "clear") {
    std::cout << "removed " << backend::cpu::clear_cache() << " kernels from "
              << backend::cpu::cache_root() << "\n";
    return 0;
  }
  std::cerr << "tessera cache: unknown subcommand '" << what << "' (ls, stats, clear)\n";
  return 1;
}

}  // namespace tessera::cli
