/** \file
 * The index maps of the view-like ops (the op-trait table's kViewLike): which operand element a
 * result element comes from. One definition for every consumer, written over an index algebra:
 * the interpreter instantiates it with integers, emitters with C expressions.
 *
 * An algebra `A` provides `using Index = ...` and
 *   Index zero();                                      // the index 0
 *   Index constant(int64_t c);
 *   Index mul_add(const Index& acc, int64_t n, const Index& i);   // acc * n + i
 *   Index div_mod(const Index& flat, int64_t stride, int64_t n);  // (flat / stride) % n
 *   Index minus(const Index& i, int64_t c);                      // i - c
 *   Index reverse(const Index& i, int64_t n);                    // n - 1 - i
 */
#pragma once

#include <cstddef>
#include <vector>

#include "ir/ir.h"

namespace tessera::ir {

/** For Join and Cat: the result element comes from operand 0 when `out[dim] < bound`, else from
 * operand 1. */
struct OperandPick {
  size_t dim;
  int64_t bound;
};

/** The pick of a two-operand view op (Join, Cat). */
inline OperandPick operand_pick(const Function& f, const Op& op) {
  if (op.kind == OpKind::Join) return {f.type(op.result()).shape.size() - 1, 1};
  TS_INTERNAL_ASSERT(op.kind == OpKind::Cat) << "operand_pick of " << op_name(op.kind);
  return {0, f.type(op.operands[0]).shape[0]};
}

/** The index into operand `k` of view-like `op` of the result element at `out`. */
template <class A>
std::vector<typename A::Index> operand_index(const Function& f, const Op& op, size_t k,
                                             const std::vector<typename A::Index>& out, A& a) {
  using Index = typename A::Index;
  std::vector<Index> ix;
  switch (op.kind) {
    case OpKind::Splat:
      return ix;
    case OpKind::Broadcast: {
      const auto& src = f.type(op.operands[0]).shape;
      for (size_t d = 0; d < src.size(); ++d) ix.push_back(src[d] == 1 ? a.zero() : out[d]);
      return ix;
    }
    case OpKind::ExpandDims:
      for (size_t d = 0; d < out.size(); ++d) {
        if (static_cast<int64_t>(d) != op.ival) ix.push_back(out[d]);
      }
      return ix;
    case OpKind::Permute:
      ix.assign(out.size(), a.zero());
      for (size_t d = 0; d < out.size(); ++d)
        ix[static_cast<size_t>((op.ival >> (4 * d)) & 15)] = out[d];
      return ix;
    case OpKind::Reshape: {
      const auto& rs = f.type(op.result()).shape;
      const auto& in = f.type(op.operands[0]).shape;
      Index flat = a.zero();
      for (size_t d = 0; d < rs.size(); ++d) flat = a.mul_add(flat, rs[d], out[d]);
      ix.assign(in.size(), a.zero());
      int64_t stride = 1;
      for (size_t d = in.size(); d-- > 0;) {
        ix[d] = a.div_mod(flat, stride, in[d]);
        stride *= in[d];
      }
      return ix;
    }
    case OpKind::Extract:
      ix = out;
      ix.push_back(a.constant(op.ival));
      return ix;
    case OpKind::Join:
      return std::vector<Index>(out.begin(), out.end() - 1);
    case OpKind::Cat:
      ix = out;
      if (k == 1) ix[0] = a.minus(out[0], f.type(op.operands[0]).shape[0]);
      return ix;
    case OpKind::Flip:
      ix = out;
      ix[static_cast<size_t>(op.ival)] =
          a.reverse(out[static_cast<size_t>(op.ival)], f.type(op.result()).shape[op.ival]);
      return ix;
    default:
      TS_INTERNAL_ASSERT(false) << "no index map for " << op_name(op.kind);
  }
  return ix;
}

/** The integer algebra (the interpreter, constant evaluation). */
struct IntIndexAlgebra {
  using Index = int64_t;
  Index zero() const { return 0; }
  Index constant(int64_t c) const { return c; }
  Index mul_add(Index acc, int64_t n, Index i) const { return acc * n + i; }
  Index div_mod(Index flat, int64_t stride, int64_t n) const { return (flat / stride) % n; }
  Index minus(Index i, int64_t c) const { return i - c; }
  Index reverse(Index i, int64_t n) const { return n - 1 - i; }
};

}  // namespace tessera::ir
