/** \file
 * Tile IR -> CUDA C++ for NVRTC, first stage (research/codegen_design.md §8, stage 1, correct
 * and simple): one CUDA block per program with `num_warps * 32` threads. Index, pointer and mask
 * expressions stay inline (evaluated per element, as on the CPU); tiles the materialization plan
 * stores (ir/materialize.h) live in shared memory at offsets fixed here. Every loop over a tile's
 * elements is spread over the block's threads (consecutive threads on consecutive elements, so
 * global accesses coalesce) and ends with a barrier; scalars are computed by every thread alike,
 * so control flow stays uniform. Reductions use a warp per output (lanes stride the axis, then a
 * shuffle butterfly) when outputs are fewer than threads, else a thread per output; dots compute
 * one output element per thread over shared-memory operands with the CPU's multiply-adds in the
 * CPU's order. Register layouts, vector accesses and tensor cores are the next stages.
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

/** CUDA C++ for `f` (an `extern "C" __global__ tessera_kernel(trt::Grid, slots)`). A kernel
 * whose tiles need more than `max_shared_bytes` of shared memory is a CompileError naming it.
 * `checked`: TESSERA_DEBUG's checks, recorded in a trt::GpuDebug passed after the parameters. */
Emitted emit(const ir::Function& f, int64_t max_shared_bytes, bool checked = false);

}  // namespace tessera::backend::cuda
