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
  /** The op's operands in order: -1 the value being stored (a prologue: loaded), k >= 0 extra
   * input k, -2 - j constant j (a Scalar argument, `x * 2`, in the compute dtype). */
  std::vector<int> operands;
  std::vector<Scalar> constants;
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

/** A prologue fused into a user's kernel: every load through the base's pointer parameter
 * `spec.target`, `X + offs`, loads `op(X at offs, inputs at g(offs))` instead (where the mask
 * holds; `other` elsewhere): the pointwise op whose result the kernel read now runs inside it, on
 * X, the op's operand now bound to that parameter (`operands`: -1 for X). Extra parameters as
 * make_epilogue_kernel's. */
std::unique_ptr<JITFunction> make_prologue_kernel(const JITFunction& base, EpilogueSpec spec);

/**
 * A kernel the graph compiler generates for built-in ops fused together (vertical fusion).
 *
 * Flat (`row_block == 0`): program k computes elements [k * BLOCK, (k + 1) * BLOCK) of the index
 * space (row-major over its shape) for a chain of pointwise ops.
 *
 * Rows (`row_block > 0`, a persistent reduction): the space is rows of `N` elements; program r
 * holds row r whole in a tile of BLOCK = row_block >= N elements, so ops on the row's elements,
 * reductions along it (sum, mean, max, min) and ops on the reductions' per-row values (`row`
 * steps) all stay in registers: softmax or layer norm written with built-in ops, in one pass.
 *
 * Each input is loaded at its index map (`row` inputs at the row's index r, others at the
 * element's index i = r * N + j); each step is rounded to its result dtype, as eager rounds what
 * it stores; outputs are dense (`row` steps store one value per row). Intermediate steps never
 * reach memory.
 *
 * Parameters: the outputs' pointers, the column sums' partials (`column_sums`), the inputs'
 * pointers, `n` (the number of elements), `N` (rows only), `R` (with column sums), the index maps'
 * parameters (each input's sizes, then strides), then the constexpr `BLOCK` (and `ROWS` with
 * column sums).
 */
struct PointwiseSpec {
  std::string name;  ///< the kernel's ("fused_mul_exp_add")
  struct Operand {
    enum class Kind : uint8_t { Input, Step, Constant } kind = Kind::Input;
    size_t index = 0;                   ///< Input: the input; Step: the step
    Scalar value = Scalar(int64_t{0});  ///< Constant: a scalar argument of the op (`x * 2`) ...
    DType dtype = DType::Float32;       ///< ... in the dtype eager converts it to first
  };
  /** MaxOfRow: max without its NaN pass, where a NaN reaches the result anyway (softmax's shift:
   * x - max is NaN at the NaN). */
  enum class Reduce : uint8_t { None, Sum, Mean, Max, Min, MaxOfRow };
  struct Step {
    ops_detail::PwOp op = ops_detail::PwOp::None;
    Reduce reduce = Reduce::None;    ///< a reduction along the row of its one operand
    DType compute = DType::Float32;  ///< as the eager op computes (a reduction: accumulates)
    DType result = DType::Float32;   ///< the eager op's result dtype
    std::vector<Operand> operands;
    Scalar alpha = Scalar(int64_t{1});  ///< add/sub
    ops_detail::ClampArgs clamp;        ///< clamp's bounds
    bool row = false;                   ///< one value per row
  };
  struct Input : EpilogueSpec::Input {
    bool row = false;  ///< indexed by the row, one value per row
    /** Rows: an input of the whole space read as its map at the row plus the index along the row
     * times `last_stride` (a weight `[N]`: 0 + j; no division by N per element). */
    bool split = false;
    FusedInt last_stride;
  };
  std::vector<Step> steps;
  std::vector<Input> inputs;    ///< where element i (row r) of the space is in each input
  std::vector<size_t> outputs;  ///< the step each output stores
  /** Rows held whole: steps of the whole space summed over the rows (a bias or norm weight's
   * gradient). The kernel then takes the row count R and a constexpr ROWS after BLOCK; program p
   * holds rows [p * ROWS, (p + 1) * ROWS) and stores each sum's partial, in col_k's dtype (the
   * caller's accumulator), at `col_k + p * N + j` (params `col0...` after the outputs); the caller
   * adds the partials. */
  std::vector<size_t> column_sums;
  bool wide = false;      ///< 64-bit indices
  int64_t row_block = 0;  ///< rows: BLOCK, a power of two >= N (looped: any power of two)
  /** Rows longer than a block: each pass over the row walks it in blocks (fused.cpp,
   * looped_rows); a softmax reads its row three times instead of holding it. */
  bool looped = false;
};
std::unique_ptr<JITFunction> make_pointwise_kernel(PointwiseSpec spec);

}  // namespace tessera::tl
