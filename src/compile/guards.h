/** \file
 * The guards of a compiled graph (DESIGN D7): what every argument leaf must look like (a packed
 * compare per tensor on the hot path), which arguments share memory, and one bytecode program
 * that evaluates the shape environment's guards and every size expression the run needs. `match`
 * checks them without a lock and, on a miss, names the first guard that failed (the recompile
 * explanation).
 */
#pragma once

#include <algorithm>
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
inline uint64_t pack_key(const TensorImpl* t) {
  const Device d = t->device();
  const uint64_t flags = t->flags();
  const bool plain = !t->has_symbolic_shape() && t->has_data();
  return static_cast<uint64_t>(t->dtype()) | (static_cast<uint64_t>(d.type()) << 8) |
         (static_cast<uint64_t>(static_cast<uint8_t>(d.index())) << 16) |
         (static_cast<uint64_t>(t->dim()) << 24) |
         (static_cast<uint64_t>((flags & kTensorAutograd) != 0) << 40) |
         (static_cast<uint64_t>(plain) << 41);
}
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
  /** Whether grad mode must be on (1) or off (0) when a tensor argument or a closed-over tensor
   * requires grad (what the trace recorded depends on it); -1 when none does. */
  int grad_mode = -1;
  /** The closed-over tensors' autograd flag as traced (requires grad or has a history). */
  std::vector<std::pair<const TensorImpl*, bool>> captured_grad;

  /** Builds the program: the environment's guards, then every size expression `g` needs. */
  void finish(const compiler::Graph& g);

  /** Checks every guard; on failure writes the first failed one to `why` (when given). */
  bool match(const std::vector<IValue>& args, Scratch& s, std::string* why) const;

  /** Computes the program's values from symbols bound earlier (`s.symbols`), checking no guard:
   * a backward graph's sizes from its forward call's symbols. False on overflow. */
  bool evaluate(Scratch& s) const {
    s.values.resize(program_->num_outputs());
    return program_->size() == 0 || program_->run(s.symbols.data(), s.values.data());
  }

  /** The program (the environment's guards first) and the number of guards (AOT export). */
  const sym::Program& program() const { return *program_; }
  size_t num_guards() const { return num_guards_; }
  /** Guard `k` as a failed `match` explains it ("s0 < 100 failed (branch, guard from f.cpp:3)"). */
  std::string describe_guard(size_t k) const { return explain_guard(k); }

  /** An expression's value in this call (after `match`), and a reference to it. */
  int64_t value_of(sym::ExprPtr e, const Scratch& s) const;
  SymRef ref_of(sym::ExprPtr e) const;

 private:
  static bool constant_equal(const IValue& a, const IValue& b);
  bool fast_leaf(const LeafGuard& g, const TensorImpl* impl, Scratch& s) const;
  std::optional<std::string> explain_leaf(size_t i, const Tensor& t, Scratch& s) const;
  std::string explain_constant(size_t i, const IValue& got) const;
  std::string explain_guard(size_t k) const;

  const compiler::Graph* graph_ = nullptr;
  std::unique_ptr<sym::Program> program_;  ///< env guards first, then every expression needed
  size_t num_guards_ = 0;
  std::unordered_map<sym::ExprPtr, size_t> slot_;  ///< expression -> program output
};

// ---- the hot path, inline in the callers (the cache's lookup, the executor's sizes) -----------

inline int64_t Guards::value_of(sym::ExprPtr e, const Scratch& s) const {
  if (auto c = e->constant()) return *c;
  return s.values[slot_.at(e)];
}

inline SymRef Guards::ref_of(sym::ExprPtr e) const {
  if (auto c = e->constant()) return {*c, -1};
  return {0, static_cast<int64_t>(slot_.at(e))};
}

inline bool Guards::constant_equal(const IValue& a, const IValue& b) {
  if (a.is_none() || b.is_none()) return a.is_none() && b.is_none();
  if (a.is_bool() && b.is_bool()) return a.to_bool() == b.to_bool();
  if (a.is_int() && b.is_int()) return a.to_int() == b.to_int();
  if (a.is_double() && b.is_double()) return a.to_double() == b.to_double();
  return false;
}

// The hot path of a tensor leaf: its packed key, then raw size, stride and offset words.
inline bool Guards::fast_leaf(const LeafGuard& g, const TensorImpl* impl, Scratch& s) const {
  if (__builtin_expect(pack_key(impl) != g.key, 0)) return false;
  // dtype, device, rank and requires_grad as traced; sizes plain: compare the raw words.
  const SymInt* sz = impl->sizes().data();
  for (int64_t d = 0; d < g.dim; ++d) {
    const int sym_index = g.size_symbol[static_cast<size_t>(d)];
    const int64_t v = sz[d].raw();
    if (sym_index < 0) {
      if (v != g.sizes[static_cast<size_t>(d)]) return false;
    } else {
      int64_t& bound = s.symbols[static_cast<size_t>(sym_index)];
      if (v < 2 || (bound >= 0 && bound != v)) return false;
      bound = v;
    }
  }
  if (g.contiguous) {
    if (!impl->is_contiguous()) return false;
  } else {
    const SymInt* st = impl->strides().data();
    for (int64_t d = 0; d < g.dim; ++d) {
      if (st[d].raw() != g.strides[static_cast<size_t>(d)]) return false;
    }
  }
  if (impl->storage_offset().raw() != g.offset) return false;
  return true;
}

inline bool Guards::match(const std::vector<IValue>& args, Scratch& s, std::string* why) const {
  auto fail = [&](const std::string& msg) {
    if (why) *why = msg;
    return false;
  };
  if (args.size() != leaves.size()) return fail("the arguments' structure changed");
  s.symbols.assign(symbol_sources.size(), -1);  // unbound (sizes bound to symbols are >= 2)
  for (size_t i = 0; i < leaves.size(); ++i) {
    const LeafGuard& g = leaves[i];
    const IValue& a = args[i];
    if (!g.tensor) {
      if (a.is_tensor() || !constant_equal(a, g.constant)) {
        return why ? fail(explain_constant(i, a)) : false;
      }
      continue;
    }
    if (!a.is_tensor() || !a.to_tensor().defined()) return fail(leaf_name(i) + " is a tensor");
    const Tensor& t = a.to_tensor();
    const TensorImpl* impl = t.impl();
    if (__builtin_expect(fast_leaf(g, impl, s), 1)) continue;
    if (!why) return false;
    if (auto msg = explain_leaf(i, t, s)) return fail(*msg);
  }
  // Tensor arguments share memory exactly as when traced.
  for (size_t a = 0; a < tensor_leaves.size(); ++a) {
    const StorageImpl* sa = args[tensor_leaves[a]].to_tensor().impl()->storage();
    for (size_t b = a + 1; b < tensor_leaves.size(); ++b) {
      const bool shares = sa == args[tensor_leaves[b]].to_tensor().impl()->storage();
      const bool traced = std::find(alias_pairs.begin(), alias_pairs.end(),
                                    std::pair<size_t, size_t>{
                                        tensor_leaves[a], tensor_leaves[b]}) != alias_pairs.end();
      if (shares != traced) {
        return fail(leaf_name(tensor_leaves[a]) + " and " + leaf_name(tensor_leaves[b]) +
                    (traced ? " share memory" : " do not share memory") + " failed");
      }
    }
  }
  if (grad_mode >= 0 && grad_enabled() != (grad_mode != 0))
    return fail(std::string("grad mode is ") + (grad_mode ? "enabled" : "disabled") + " failed");
  for (const auto& [t, flag] : captured_grad) {
    if (((t->flags() & kTensorAutograd) != 0) != flag)
      return fail(std::string("a closed-over tensor ") +
                  (flag ? "requires grad" : "does not require grad") + " failed");
  }
  if (program_->size() == 0) return true;
  s.values.resize(program_->num_outputs());
  if (!program_->run(s.symbols.data(), s.values.data()))
    return fail("a size expression divides by zero or overflows");
  for (size_t k = 0; k < num_guards_; ++k) {
    if (s.values[k] == 0) return why ? fail(explain_guard(k)) : false;
  }
  return true;
}

}  // namespace tessera::compile_detail
