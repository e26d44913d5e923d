/** \file
 * The compiled-kernel cache as data (what `tessera cache ls|stats|clear` shows): CPU shared
 * objects and CUDA cubins under `TESSERA_CACHE_DIR`, with each CUDA kernel's resources.
 *
 *     for (const auto& e : tessera::cache::entries())
 *       std::cout << e.kernel << " " << e.target << " " << e.registers << "\n";
 */
#pragma once

#include <cstdint>
#include <ctime>
#include <string>
#include <vector>

namespace tessera::cache {

/** One compiled kernel on disk. */
struct Entry {
  std::string key;     ///< the entry's digest (its folder's name)
  std::string kernel;  ///< the kernel's name
  std::string target;  ///< "cpu", or the CUDA architecture ("sm_90")
  uint64_t bytes = 0;  ///< the binary's size
  std::time_t modified = 0;
  // CUDA only (-1 on the CPU or where ptxas did not say):
  int registers = -1;                           ///< per thread
  int64_t shared_bytes = -1;                    ///< static shared memory per block
  int64_t spill_stores = -1, spill_loads = -1;  ///< bytes
};

/** The cache's root folder (`TESSERA_CACHE_DIR`; the CPU's entries are under cpu/, CUDA's under
 * cuda/). */
std::string root();
/** Every entry, CPU first. */
std::vector<Entry> entries();

struct Stats {
  size_t kernels = 0, cpu_kernels = 0, cuda_kernels = 0;
  uint64_t bytes = 0;
};
Stats stats();

/** Removes every entry (CPU and CUDA); returns how many there were. Kernels a running process
 * has loaded keep working; the next process compiles again. */
size_t clear();

}  // namespace tessera::cache
