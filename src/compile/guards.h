/** \file
 * The guards of a compiled graph (DESIGN D7): what every argument leaf must look like (a packed
 * compare per tensor on the hot path), which arguments share memory, and one bytecode program
 * that evaluates the shape environment's guards and every size expression the run needs. `match`
 * checks them without a lock and, on a miss, names the first guard that failed (the recompile
 * explanation).
 */
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "compile/graph.h"

namespace tessera::compile_detail {

namespace sym = compiler::sym;

/** What one argument leaf must look like. */
struct LeafGuard {
  bool tensor = false;
  IValue constant;  ///< non-tensor leaves: the exact value
  DType dtype = DType::Float32;
  Device device;
  int64_t dim = 0;
  bool requires_grad = false;
  bool contiguous = false;       ///< dynamic sizes: strides must be contiguous
  std::vector<int64_t> sizes;    ///< static size, or -1 when symbolic
  std::vector<int> size_symbol;  ///< symbol index per dim (-1 static)
  std::vector<int64_t> strides;  ///< static strides (empty when `contiguous`)
  int64_t offset = 0;
  const void* storage = nullptr;  ///< captured tensors: identity
  uint64_t key = 0;               ///< dtype, device, rank and grad packed (one compare)
};

/** dtype, device, rank, autograd flag and "plain sizes with data" in one word. */
uint64_t pack_key(const TensorImpl* t);
/** The name of argument leaf `i` in guards and messages ("arg0"). */
std::string leaf_name(size_t i);

/** One call's values: the symbols bound by the leaves, then the program's outputs. */
struct Scratch {
  std::vector<int64_t> symbols, values;
};

/** An integer known at call start: a constant or an output of the guard program. */
struct SymRef {
  int64_t constant = 0;
  int64_t slot = -1;
  int64_t get(const Scratch& s) const {
    return slot < 0 ? constant : s.values[static_cast<size_t>(slot)];
  }
};

class Guards {
 public:
  std::vector<LeafGuard> leaves;
  std::vector<std::pair<size_t, size_t>> alias_pairs;  ///< leaf pairs that shared storage
  std::vector<std::pair<size_t, int>> symbol_sources;  ///< per symbol: (leaf, dim)
  std::vector<size_t> tensor_leaves;                   ///< positions of the tensor arguments

  /** Builds the program: the environment's guards, then every size expression `g` needs. */
  void finish(const compiler::Graph& g);

  /** Checks every guard; on failure writes the first failed one to `why` (when given). */
  bool match(const std::vector<IValue>& args, Scratch& s, std::string* why) const;

  /** An expression's value in this call (after `match`), and a reference to it. */
  int64_t value_of(sym::ExprPtr e, const Scratch& s) const;
  SymRef ref_of(sym::ExprPtr e) const;

 private:
  bool fast_leaf(const LeafGuard& g, const TensorImpl* impl, Scratch& s) const;
  std::optional<std::string> explain_leaf(size_t i, const Tensor& t, Scratch& s) const;

  const compiler::Graph* graph_ = nullptr;
  std::unique_ptr<sym::Program> program_;  ///< env guards first, then every expression needed
  size_t num_guards_ = 0;
  std::unordered_map<sym::ExprPtr, size_t> slot_;  ///< expression -> program output
};

}  // namespace tessera::compile_detail
