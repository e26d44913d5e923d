/** \file
 * Inline C expressions of tile-IR values at one element, shared by the C++-family emitters (the
 * CPU's C++ and CUDA C++): a value is its scalar variable, its stored array's element, or the
 * expression of its defining op evaluated at that element (index, pointer and mask tiles are
 * never stored). Emitters derive from `ExprPrinter` and override `op_expr` where they add
 * something (the CPU's checked mode and proven masks).
 */
#pragma once

#include <string>
#include <vector>

#include "ir/ir.h"
#include "ir/materialize.h"
#include "ir/uses.h"

namespace tessera::backend::cfamily {

using Index = std::vector<std::string>;

/** Row-major flat index of `idx` into an array of `shape` (size-1 and "0" terms left out). */
std::string flat(const SmallVector<int64_t, 4>& shape, const Index& idx);

class ExprPrinter {
 public:
  explicit ExprPrinter(const ir::Function& f) : f_(f), uses_(f), plan_(f, uses_) {}
  virtual ~ExprPrinter() = default;

 protected:
  /** The C name of a value. */
  static std::string name(ir::ValueId v) { return "v" + std::to_string(v); }
  /** `v` at element `idx`: its variable, its array's element, or its op's inline expression. */
  std::string expr(ir::ValueId v, const Index& idx);
  /** The inline expression of `op`'s result at `idx` (elementwise and view-like ops). */
  virtual std::string op_expr(const ir::Op& op, const Index& idx);
  /** A pointer offset as a 64-bit expression: chains of +, - and * over signed integers of at
   * most 32 bits are evaluated in 64 bits, so compilers see addresses affine in the loop index;
   * the result differs from 32-bit wrapping arithmetic only where that arithmetic overflows,
   * which addresses memory outside the tensor anyway (docs/decisions.md, "pointer offsets"). */
  std::string offset_expr(ir::ValueId v, const Index& idx);
  /** The index into operand `k` of view-like `op` for the result index `idx` (ir/index_map.h). */
  Index source_index(const ir::Op& op, const Index& idx, size_t k = 0) const;

  const ir::Function& f_;
  const ir::UseInfo uses_;
  const ir::MaterializationPlan plan_;
};

/** The call that performs atomic `op` (Atomic or AtomicCas) on pointer `p` with value `v` (`c`
 * and `nv`: the compare-and-swap's operands) through the runtime's atomics (trt::atomic_*). */
std::string atomic_call(const ir::Function& f, const ir::Op& op, const std::string& p,
                        const std::string& v, const std::string& c, const std::string& nv);

/** device_print's printf format pieces for operand `k` of `op`: the escaped prefix and label, the
 * conversion and the cast that opens the argument. */
struct PrintFormat {
  std::string prefix, label, conversion, cast;
};
PrintFormat print_format(const ir::Function& f, const ir::Op& op, size_t k);

}  // namespace tessera::backend::cfamily
