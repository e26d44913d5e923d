/** \file
 * The CUDA backend (DESIGN D3, D5): generated CUDA C++ compiled by NVRTC for each device's
 * architecture, cubins in the disk cache, launched on the device's current stream.
 */
#pragma once

#include <ctime>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/emit.h"

namespace tessera::runtime::cuda {
struct PtxasReport;
}

namespace tessera::backend::cuda {

/** The backend of CUDA device `device` (one per device: its architecture is in its target key). */
const Backend& backend_for(int device);

/** A backend that generates and NVRTC-compiles for `sm_<arch>` with no GPU (kernels are built and
 * cached, never loaded or launched): TESSERA_CROSSCHECK=nvrtc. */
const Backend& compile_only_backend(int arch);

/** The backend of TESSERA_CROSSCHECK ("cuda" or "nvrtc"): kernels on CPU tensors run on the CPU
 * backend and their CUDA code beside them (backend/cuda/crosscheck.cpp). */
const Backend& crosscheck_backend(const std::string& mode);

/** Launches `k` on CUDA backend `cuda`; a checked kernel's violations are recorded but not
 * reported (the cross-check's CUDA side of a kernel the CPU side reports on). */
void launch_without_reports(const Backend& cuda, const Kernel& k, const GridSize& g,
                            ArrayRef<Arg> args);

/** The registers, shared and local memory of a built kernel, as one line (TESSERA_DUMP=src). */
std::string resources_line(const Kernel& k);

/** The same to PTX for `compute_<arch>` (NUL-terminated text the driver compiles at load). */
std::string compile_ptx_for_arch(const std::string& source, const std::string& name, int arch);

/** An entry of the disk cache's CUDA area (`tessera cache ls`). */
struct CacheEntry {
  std::string key, kernel, arch;
  std::string resources;  ///< registers, shared memory, spills
  uint64_t bytes = 0;     ///< the cubin's size
  std::time_t mtime = 0;
  int registers = -1;
  int64_t shared_bytes = -1, spill_stores = -1, spill_loads = -1;
};
std::vector<CacheEntry> cache_entries();
/** Removes every cached cubin; returns how many entries there were. */
size_t clear_cache();

/** NVRTC-compiles generated source for `sm_<arch>` with the tile runtime headers (tests compile
 * every generated kernel this way on machines without a GPU); a CompileError with NVRTC's log.
 * `report`, if given, receives ptxas's registers, stack and spills; `arch_suffix` "a" compiles
 * for the arch-specific target (sm_90a). */
std::string compile_for_arch(const std::string& source, const std::string& name, int arch,
                             runtime::cuda::PtxasReport* report = nullptr,
                             const std::string& arch_suffix = "");

}  // namespace tessera::backend::cuda
