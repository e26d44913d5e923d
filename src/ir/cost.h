/** \file
 * What a kernel launch costs, derived from its tile IR: floating-point operations and bytes
 * loaded and stored, over the whole grid. Used by `FlopCounterMode` for operators without a
 * declared FLOP formula.
 *
 * Counting rules: each element of a float-valued binary or unary op (other than negation and
 * absolute value) is one FLOP; a reduction is one FLOP per input element; loads and stores move
 * their tile's elements. Masks are not evaluated: FLOPs are the work the kernel executes (masked
 * lanes compute too, on every backend), and bytes are an upper bound (masked lanes move none). Loop
 * trip counts and branch conditions are evaluated from the launch's scalar arguments and each
 * program's id where they depend only on those; otherwise a loop counts once and a branch counts
 * its costlier side, and the result is marked inexact.
 */
#pragma once

#include <cstdint>
#include <vector>

#include "ir/ir.h"

namespace tessera::ir {

struct KernelCost {
  double flops = 0;
  double bytes_read = 0;
  double bytes_written = 0;
  bool exact = true;  ///< every trip count and branch was evaluated

  KernelCost& operator+=(const KernelCost& o) {
    flops += o.flops;
    bytes_read += o.bytes_read;
    bytes_written += o.bytes_written;
    exact = exact && o.exact;
    return *this;
  }
};

/** A launch's scalar arguments: by parameter, an integer or float value (pointers: unused). */
struct ParamValue {
  int64_t i = 0;
  double f = 0;
};

/** The cost of launching `f` on a grid with these parameter values. */
KernelCost launch_cost(const Function& f, const std::vector<ParamValue>& params,
                       const int64_t grid[3]);

}  // namespace tessera::ir
