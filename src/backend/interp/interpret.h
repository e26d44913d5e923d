/** \file
 * The reference interpreter of the tile IR (`TESSERA_INTERPRET=1`, like `TRITON_INTERPRET`).
 *
 * It runs a kernel's optimized IR element by element with the generated code's scalar semantics
 * (the same helpers as constant folding and `tessera/trt`): integers wrap in their dtype,
 * bfloat16/float16/float8 values are rounded to their type after every operation, math
 * functions are the tile runtime's. Float sums accumulate in double and round once (the compiled
 * code sums in float lanes), so they can differ from the compiled kernel in the last bits.
 *
 * `device_assert` is checked (a failing lane is reported; the launch then fails) and
 * `device_print` prints, one line per element.
 *
 * With bounds (`TESSERA_DEBUG=1` together with `TESSERA_INTERPRET=1`), every load and store lane is
 * checked against the extent of the tensor its pointer derives from (the parameter it was computed
 * from, tracked per element); an out-of-bounds lane is reported (kernel, line, program, lane,
 * element) and suppressed: a load gives `other` (or 0) and a store writes nothing, so the process
 * keeps running; an int32 add, subtract or multiply whose exact result does not fit is reported
 * (it still wraps, as on a GPU).
 */
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/common/checks.h"
#include "ir/ir.h"
#include "tessera/trt/cpu.h"

namespace tessera::backend::interp {

struct InterpretOptions {
  std::string kernel;
  /** Per parameter (empty: no bounds checks). */
  std::vector<PointerBounds> bounds;
  /** Set in the debug mode: int32 overflows are checked and counted, with out-of-bounds lanes. */
  bool check_overflow = false;
  /** The launch's counts (device_assert is always evaluated, as the interpreter is for debugging).
   */
  CheckCounters* counters = nullptr;
};

/** Runs programs [pid_begin, pid_end) of `f` over `grid`, with arguments in the generated code's
 * layout (one trt::Arg per parameter). Thread-safe: programs may run on several threads. */
void interpret(const ir::Function& f, const trt::Grid& grid, int64_t pid_begin, int64_t pid_end,
               const trt::Arg* args, const InterpretOptions& options);

}  // namespace tessera::backend::interp
