/** \file
 * Compiles generated C++ kernels with the system compiler and loads them (DESIGN.md D2, D3).
 *
 * A kernel's binary is addressed by the SHA-256 of everything that determines it: the source,
 * the tile runtime headers, tessera's build id, the compiler's identity, the flags and the CPU's
 * features. Entries live under `$TESSERA_CACHE_DIR/cpu/<2 hex>/<key>/` (kernel-<id>.so, kernel.cpp,
 * info) in the store of runtime/disk_cache.h: built in a private folder and renamed into place, so
 * concurrent processes never see a half-written entry and the first rename wins; the shared
 * object's SHA-256 is checked when a process first loads it, and an entry that is damaged (or
 * that the loader refuses) is rebuilt instead of run.
 */
#pragma once

#include <cstdint>
#include <ctime>
#include <string>
#include <vector>

#include "tessera/trt/cpu.h"

namespace tessera::backend::cpu {

struct CompiledBinary {
  trt::KernelFn fn = nullptr;
  std::string key;
  std::string path;        ///< the cache entry's directory
  bool from_disk = false;  ///< found in the disk cache (no compiler run)
  double compile_ms = 0;   ///< time spent in the compiler (0 on a cache hit)
};

/** Compiles (or finds in the caches) `source` and returns its entry point. `kernel` names it in
 * messages. A compiler failure is an InternalError (generated code must compile) that keeps the
 * source and the compiler's output for a bug report. */
CompiledBinary compile(const std::string& source, const std::string& kernel);

/** One kernel of a batch. */
struct KernelSource {
  std::string source;
  std::string kernel;  ///< its name, for messages
};
/** Compiles many kernels at once: those not in the caches are split into one translation unit
 * per thread of the pool (`runtime::num_threads()`: all cores unless TESSERA_NUM_THREADS says
 * otherwise) and the compiler runs on all of them in parallel (DESIGN.md D3). Each kernel still
 * gets its own cache entry (its shared object a hard link to the one it was built in).
 * `max_groups` caps the number of translation units (0: one per core). */
std::vector<CompiledBinary> compile_many(const std::vector<KernelSource>& kernels,
                                         size_t max_groups = 0);

/** Compiles kernels' sources into one shared object for `-march=<march>` (AOT packages): source i
 * gets the entry point `tessera_kernel_<i>`. Returns the shared object's bytes; an InternalError
 * with the compiler's output when it fails. Not cached. */
std::string compile_bundle(const std::vector<std::string>& sources, const std::string& march);

/** The disk cache key of a kernel's source (no compiler run). */
std::string source_key(const std::string& source);

/** The compiler command and its `--version` line. */
struct CompilerInfo {
  std::string path;
  std::string version;
  std::vector<std::string> flags;
  std::string target;  ///< a digest of the CPU's feature flags
};
const CompilerInfo& compiler();
/** Whether this is an Intel CPU with AVX-512: two full 512-bit FMA units, and GCC's tuning for it
 * prefers 256-bit loops (AMD's AVX-512 splits 512-bit operations into halves). */
bool intel_avx512();

/** The disk cache, for `tessera cache`. */
struct CacheEntry {
  std::string key;
  std::string kernel;
  std::string dir;
  std::string so;  ///< its shared object
  uint64_t bytes = 0;
  std::time_t mtime = 0;
};
std::string cache_root();
/** The directory holding this build's runtime headers (written under the cache root on first
 * use); generated kernels compile with `-I` it. */
std::string include_dir();
std::vector<CacheEntry> cache_entries();
/** Removes every CPU kernel; returns how many entries were removed. */
size_t clear_cache();
/** Forgets the binaries loaded by this process (tests: the next compile goes to disk). */
void forget_loaded();

}  // namespace tessera::backend::cpu
