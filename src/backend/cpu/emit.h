/** \file
 * The CPU backend's emitter: tile IR -> C++ source that includes only `tessera/trt/cpu.h`.
 *
 * One extern "C" function runs a range of programs. Within a program, tile values do not become
 * arrays unless they must: index, pointer and mask arithmetic and single-use loads are inlined
 * into the loop of their consumer (a store, a reduction, or a value that is materialized), so
 * `store(out + offs, load(x + offs, m) + load(y + offs, m), m)` is one vectorizable masked loop.
 * A load read by a few ops with no store between them (a softmax row's max and its exp) is read
 * again by each (the second read hits the cache; a copy would be one more pass), and a reduction
 * loads such a row in place, 16 lanes at a time, where its mask is proven true. Values that are
 * reused, expensive (exp, log, ...), loaded before a store, reduced, or carried across a loop
 * become 64-byte-aligned local arrays.
 */
#pragma once

#include <string>
#include <vector>

#include "backend/common/checks.h"
#include "ir/ir.h"

namespace tessera::backend::cpu {

struct Emitted {
  std::string source;
  /** The exported function (trt::KernelFn). */
  std::string symbol = "tessera_kernel";
  /** Elements processed per program (loop bodies counted once), to size thread-pool chunks. */
  int64_t work_per_program = 1;
  /** The checked mode's sites (`checked` kernels): the `site` numbers the code reports. */
  std::vector<CheckSite> sites;
};

/** With `checked` (TESSERA_DEBUG), every load, store and atomic lane is checked against the
 * bounds of the parameters its pointer derives from, and device_assert is evaluated; the kernel
 * then takes a trt::DebugCtx* after its parameters. */
Emitted emit(const ir::Function& f, bool checked = false);

}  // namespace tessera::backend::cpu
