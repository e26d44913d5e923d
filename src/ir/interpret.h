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

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "tessera/trt/cpu.h"

namespace tessera::ir {

/** The memory a pointer parameter may touch (byte addresses, [lo, hi)). */
struct PointerBounds {
  bool known = false;
  uintptr_t base = 0;  ///< the tensor's first element (element indices are reported from it)
  uintptr_t lo = 0, hi = 0;
  int64_t elem_size = 1;
};

struct InterpretOptions {
  std::string kernel;
  /** Per parameter (empty: no checks). */
  std::vector<PointerBounds> bounds;
  /** Out-of-bounds accesses seen (all threads); the first few are printed. */
  std::atomic<int64_t>* violations = nullptr;
  /** int32 adds, subtracts and multiplies whose exact result wrapped (null: not checked). */
  std::atomic<int64_t>* overflows = nullptr;
  /** Failed device_assert lanes (all threads), and the first failure's report. */
  std::atomic<int64_t>* assert_failures = nullptr;
  std::string* first_assert = nullptr;
};

/** A checked operation of a kernel compiled for the debug mode: what it is ("load", "store",
 * "atomic", "assert"), where, and an assertion's message. */
struct CheckSite {
  std::string what;
  SourceLoc loc;
  std::string text;
};

/** Reports an out-of-bounds lane in the debug mode's format (the first 10 of a launch, counted in
 * `counter`). */
void report_out_of_bounds(const std::string& kernel, const char* what, SourceLoc loc,
                          const int32_t pid[3], int64_t lane, const std::string& param,
                          const PointerBounds& b, uintptr_t addr, std::atomic<int64_t>* counter);
/** Reports an int32 result that wrapped (the first 10 of a launch, counted in `counter`). */
void report_int_overflow(const std::string& kernel, SourceLoc loc, const int32_t pid[3],
                         int64_t lane, int64_t exact, std::atomic<int64_t>* counter);
/** Reports a failing device_assert lane (the first 10), keeping the first report in `first`. */
void report_assert_failure(const std::string& kernel, SourceLoc loc, const std::string& message,
                           const int32_t pid[3], int64_t lane, std::atomic<int64_t>* counter,
                           std::string* first);

/** Runs programs [pid_begin, pid_end) of `f` over `grid`, with arguments in the generated code's
 * layout (one trt::Arg per parameter). Thread-safe: programs may run on several threads. */
void interpret(const Function& f, const trt::Grid& grid, int64_t pid_begin, int64_t pid_end,
               const trt::Arg* args, const InterpretOptions& options);

}  // namespace tessera::ir
