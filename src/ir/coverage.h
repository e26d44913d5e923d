/** \file
 * Which elements a kernel's stores cover (the graph compiler's dead-fill proof,
 * research/graph_compiler.md §4): for a pointer parameter, whether every program stores a whole
 * block of consecutive elements, block k at program `k` along one grid axis, masked by at most
 * `offsets < bound`. Then a grid of G programs stores every element of [0, min(G * tile, bound)),
 * whatever the data, and a buffer filled before the launch whose elements all lie there (and which
 * the kernel never reads) need not be filled.
 *
 * The proof is exact and conservative: offsets are linear forms over the program ids, scalar
 * parameters and the tile's indices, the block's strides must form one mixed radix (a dense
 * block, any dimension order), and only stores at the kernel's top level count (a store inside a
 * loop or a branch may not run). Anything else is "not proven", with the reason.
 */
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace tessera::ir {

struct StoreCoverage {
  bool proven = false;
  std::string why_not;   ///< when not proven: what the proof needed, in a user's words
  int axis = -1;         ///< the program_id axis that selects the block; -1: every program stores
                         ///< the same block
  int64_t tile = 0;      ///< elements per program
  bool bounded = false;  ///< masked by offsets < bound_param + bound_constant
  int bound_param = -1;  ///< an index into `f.params`, or -1 (a constant bound)
  int64_t bound_constant = 0;
  int offset_bits = 64;  ///< the offsets' width: elements beyond 2^(bits-1) - 1 are not proven
};

/** One entry per `f.params` (only pointer parameters can be proven). */
std::vector<StoreCoverage> store_coverage(const Function& f);

/** Per parameter: whether every store and atomic that may write through it (in any region)
 * addresses it as `param + offsets` (splats, broadcasts, expand_dims and addptr of the parameter
 * itself: no loaded, selected or loop-carried pointer), so the element it writes is known from the
 * offsets (a fused epilogue's rewrite). False for parameters nothing writes. */
std::vector<bool> direct_stores(const Function& f);

/** Per parameter: whether every load that may read through it addresses it as `param + offsets`
 * (as direct_stores), so the element it reads is known from the offsets (a fused prologue's
 * rewrite). False for parameters nothing loads. */
std::vector<bool> direct_loads(const Function& f);

}  // namespace tessera::ir
