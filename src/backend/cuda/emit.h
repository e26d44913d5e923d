/** \file
 * Tile IR -> CUDA C++ for NVRTC (research/codegen_design.md §8, stages 1-2): one CUDA block per
 * program with `num_warps * 32` threads; loops over a tile's elements are spread over them so
 * that global accesses coalesce. Index, pointer and mask expressions stay inline (evaluated per
 * element, as on the CPU). A tile that is only ever read at the reading thread's own element
 * (elementwise chains, stores, whole-tile reductions, loop-carried values) lives in that thread's
 * registers, an array indexed by an unrolled loop's counter; loads are materialized this way, so
 * a thread's loads are all in flight before their first use. Unrolled loops give each thread runs
 * of V consecutive elements, so contiguous, aligned loads and stores are 16-byte vector accesses
 * where a run's masks hold. Other tiles the materialization plan stores (ir/materialize.h) live in
 * shared memory at offsets fixed here, and a loop that writes or reads shared memory ends with a
 * barrier. Scalars are computed by every thread alike, so control flow stays uniform. A
 * whole-tile reduction folds each thread's elements, then each warp's by a shuffle butterfly,
 * then the warps' partials; other reductions use a warp per output when outputs are fewer than
 * threads, else a thread per output. Dots compute one output element per thread over
 * shared-memory operands with the CPU's multiply-adds in the CPU's order. Tensor cores are the
 * next stage.
 */
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/common/checks.h"
#include "ir/ir.h"

namespace tessera::backend::cuda {

struct Emitted {
  std::string source;
  int64_t shared_bytes = 0;      ///< dynamic shared memory the kernel needs
  int threads = 128;             ///< threads per block (num_warps * 32)
  std::vector<CheckSite> sites;  ///< checked: what each reported site number is
};

/** The kernel function's name in generated CUDA (`namespace tessera { __global__ void NAME(...)
 * }`): the kernel's name made an identifier (other characters become '_'; a C++ keyword gets a
 * suffix), so profilers show it. */
std::string entry_name(const std::string& kernel_name);
/** Its symbol in the module (the mangled name a cuModuleGetFunction finds). */
std::string entry_symbol(const std::string& kernel_name);
/** `source` (emitted for `kernel_name`) with the kernel an `extern "C"` function named `symbol`
 * (AOT packages: every module's entry is `tessera_kernel`). */
std::string with_extern_entry(const std::string& source, const std::string& kernel_name,
                              const std::string& symbol);

/** CUDA C++ for `f` (a `__global__ tessera::NAME(trt::Grid, slots)`: entry_name). A kernel
 * whose tiles need more than `max_shared_bytes` of shared memory is a CompileError naming it.
 * `checked`: TESSERA_DEBUG's checks, recorded in a trt::GpuDebug passed after the parameters.
 * `arch`: the target's sm_ number (90: Hopper's wgmma where a dot allows it, and the source then
 * starts with kSm90aMarker); 0 uses what every sm_80 part has. */
Emitted emit(const ir::Function& f, int64_t max_shared_bytes, bool checked = false, int arch = 0);

/** The first line of a kernel that needs sm_90a (arch-specific instructions): compile it for
 * `sm_90a`, not `sm_90`. */
inline constexpr const char* kSm90aMarker = "// tessera-target: sm_90a";
/** Whether generated `source` needs sm_90a. */
inline bool needs_sm90a(const std::string& source) {
  return source.rfind(kSm90aMarker, 0) == 0;
}

}  // namespace tessera::backend::cuda
