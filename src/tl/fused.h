/** \file
 * Kernels the graph compiler derives from a user's kernel (research/graph_compiler.md §4): an
 * epilogue fused into the kernel's stores. Every store through one pointer parameter, `W + offs`,
 * stores `op(value, inputs at g(offs))` instead of `value`: the pointwise op that read W in the
 * graph now runs inside the kernel, on the value it was about to write, and W's memory holds the
 * op's result. The derived kernel takes the base kernel's parameters, then one pointer per extra
 * input, then the integers the inputs' index maps need at run time.
 */
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ops/pointwise.h"
#include "tessera/tl.h"

namespace tessera::tl {

/** An integer of an index map: a constant in the kernel's IR, or the next Int parameter. */
struct FusedInt {
  bool param = false;
  int64_t value = 0;  ///< the constant (when not a parameter)
};

struct EpilogueSpec {
  std::string name;   ///< the derived kernel's ("add_kernel+relu")
  size_t target = 0;  ///< the base kernel's pointer parameter whose stores change
  ops_detail::PwOp op = ops_detail::PwOp::None;
  DType compute = DType::Float32;  ///< the op's compute dtype; its result is stored as W's dtype
  /** The op's operands in order: -1 the value being stored, k >= 0 extra input k. */
  std::vector<int> operands;
  /** add/sub's alpha (the op's `extra`; others take none in an epilogue). */
  Scalar alpha = Scalar(int64_t{1});
  /** Per extra input, where element `i` of W (row-major) is: `identity` (i itself), or the sum
   * over W's dimensions of index_d * strides[d], with index_d the mixed-radix digits of i over
   * `sizes` (sizes[0] is not needed). */
  struct Input {
    bool identity = true;
    std::vector<FusedInt> sizes, strides;
  };
  std::vector<Input> inputs;
};

/** Parameters of the derived kernel after the base's: the inputs' pointers, then the index maps'
 * parameters (each input's sizes, then its strides, in order). */
std::unique_ptr<JITFunction> make_epilogue_kernel(const JITFunction& base, EpilogueSpec spec);

}  // namespace tessera::tl
