/** \file
 * What each tile IR op is, in one table: its name, operand and region counts, whether it is pure,
 * touches memory, only moves elements (a view-like shape op, with an index map in
 * ir/index_map.h), is elementwise or cheap to recompute, and its FLOP count. The verifier, the
 * printer and parser, CSE and DCE, the cost model, the interpreter and the emitters read it
 * instead of keeping their own lists, so a new op is added in a few places
 * (docs/adding-an-op.md).
 */
#pragma once

#include <cstdint>

#include "ir/ir.h"

namespace tessera::ir {

enum OpFlag : uint16_t {
  kPure = 1 << 0,          ///< no side effects and no memory read: CSE may merge it, DCE drop it
  kReadsMemory = 1 << 1,   ///< Load, atomics
  kWritesMemory = 1 << 2,  ///< Store, atomics
  kSideEffects = 1 << 3,   ///< kept even when unused (stores, atomics, assert, print)
  kElementwise = 1 << 4,   ///< result element i depends on operand elements i only
  kViewLike = 1 << 5,      ///< only moves elements (an index map: ir/index_map.h)
  kCheap = 1 << 6,         ///< cheaper to recompute per element than to store (emitters inline it)
  kTerminator = 1 << 7,    ///< ends a region (Yield)
};

struct OpTraits {
  OpKind kind;
  const char* name;  ///< the IR text's mnemonic (a family name for ops with a sub-kind)
  int8_t min_operands;
  int8_t max_operands;  ///< -1: any number
  int8_t regions;       ///< how many regions the op owns
  uint16_t flags;
  int8_t flops;  ///< float operations per result element (float results); -1: per op
                 ///< (Dot, Reduce, Unary: see cost.cpp and UnaryTraits)

  bool has(OpFlag f) const { return (flags & f) != 0; }
};

/** The traits of `k`. */
const OpTraits& traits(OpKind k);
/** How many op kinds there are (the parser and tests iterate them). */
int num_op_kinds();

struct UnaryTraits {
  UnaryKind kind;
  const char* name;
  bool ints;         ///< defined on integers too (neg, not, abs); the rest need floats
  bool cheap;        ///< inlined by emitters (neg, not, abs)
  const char* math;  ///< the runtime math function (`trt::<math>`); null for neg, not, abs
  int8_t flops;      ///< per element, for float operands
};
const UnaryTraits& unary_traits(UnaryKind k);
int num_unary_kinds();

struct BinaryTraits {
  BinaryKind kind;
  const char* name;
  bool ints;    ///< defined on integers (not div_rn)
  bool floats;  ///< defined on floats (not the bitwise ops, shifts, umulhi)
};
const BinaryTraits& binary_traits(BinaryKind k);
int num_binary_kinds();

struct ReduceTraits {
  ReduceKind kind;
  const char* name;
  BinaryKind combine;  ///< the combining operation (integers; floats: max/min skip NaNs)
  bool index;          ///< gives an index (argmax, argmin), not a value
};
const ReduceTraits& reduce_traits(ReduceKind k);
int num_reduce_kinds();

int num_cmp_kinds();

}  // namespace tessera::ir
