/** \file
 * Autograd internals shared by the dispatcher hook, the engine and the formulas: the per-tensor
 * `AutogradMeta`, saved variables, formula nodes and the leaf accumulator.
 */
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tessera/autograd.h"

namespace tessera::autograd {

/** Per-tensor autograd state (hung off `TensorImpl`). */
struct AutogradMeta : AutogradMetaBase {
  bool requires_grad = false;  ///< a leaf that accumulates into `grad`
  Tensor grad;
  std::shared_ptr<Node> grad_fn;  ///< set for results of recorded operators
  uint32_t output_nr = 0;
  std::weak_ptr<Node> grad_accumulator;
  bool is_view = false;  ///< a view produced while recording (in-place writes to it are refused)
};

AutogradMeta* meta_of(const Tensor& t);
AutogradMeta& ensure_meta(const Tensor& t);
/** Re-derives the dispatcher's autograd flag from the meta. */
void refresh_flag(const Tensor& t);
/** Whether `t` requires grad (a leaf that does, or a result with a grad_fn). */
bool requires_grad(const Tensor& t);
/** The edge a gradient for `t` flows into (its grad_fn, or its leaf accumulator); invalid if none.
 */
Edge gradient_edge(const Tensor& t);
/** Whether two shapes are equal (symbolic sizes are guarded). */
inline bool same_sizes(SymIntArrayRef a, SymIntArrayRef b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!static_cast<bool>(a[i] == b[i])) return false;
  }
  return true;
}
/** A new tensor sharing `t`'s storage and geometry, without autograd state. */
Tensor shallow_alias(const Tensor& t);
/** Gives `t` a history: result `output_nr` of `fn`. */
void set_history(const Tensor& t, const std::shared_ptr<Node>& fn, uint32_t output_nr);

/** A tensor kept for the backward, with the version it had. */
struct SavedVariable {
  Tensor data;  ///< inputs: the tensor; outputs: an alias without history (no reference cycle)
  uint32_t version = 0;
  bool defined = false;
  bool is_output = false;
  std::weak_ptr<Node> owner;  ///< for outputs: the node whose result it is
  uint32_t output_nr = 0;
};

/** A registered derivative. */
struct Formula {
  SetupContextFn setup;
  BackwardFn backward;
  bool nondifferentiable = false;
};
/** The formula of `op` (built-in formulas are registered on first use). */
std::shared_ptr<const Formula> formula_of(const OperatorEntry& op);
/** Registers the built-in operators' formulas (derivatives.cpp); called once, lazily, because
 * static initialization order across files does not guarantee the operators exist earlier. */
void register_builtin_derivatives();
/** register_formula / register_nondifferentiable without the lazy built-in registration. */
void set_formula(const OperatorHandle& op, SetupContextFn setup, BackwardFn backward);
void set_nondifferentiable(std::string_view op);

struct AutogradContext::Impl {
  std::string op_name;
  SourceLoc loc;
  std::vector<SavedVariable> saved;
  bool released = false;
  std::vector<bool> needs_input_grad;
  std::vector<std::pair<std::string, IValue>> values;
  std::vector<const TensorImpl*> outputs;  ///< during setup: recognizes saved results
  std::weak_ptr<Node> node;
};

/** The grad_fn of an operator with a formula. */
class FormulaNode : public Node {
 public:
  /** Per schema argument: where its gradients go among the node's edges. */
  struct ArgSlot {
    enum class Kind : uint8_t { Other, Tensor, TensorList } kind = Kind::Other;
    uint32_t first_edge = 0, count = 0;
  };

  FormulaNode(const OperatorEntry& op, std::shared_ptr<const Formula> formula, SourceLoc loc);
  std::string name() const override { return name_; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) override;
  void release_variables() override;

  AutogradContext& ctx() { return ctx_; }
  std::vector<ArgSlot>& slots() { return slots_; }

 private:
  const OperatorEntry& op_;
  std::string name_;
  std::shared_ptr<const Formula> formula_;
  AutogradContext ctx_;
  std::vector<ArgSlot> slots_;
};

/** Adds incoming gradients into a leaf's `grad()`. */
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(Tensor variable);
  std::string name() const override { return "AccumulateGrad"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) override;
  const Tensor& variable() const { return variable_; }

 private:
  Tensor variable_;
};

/** The canonical backward name of an operator: "MulBackward", "mylib::mysinBackward". */
std::string backward_name(const std::string& op_name);

/** Set while the engine runs (see `in_backward()`). */
struct BackwardScope {
  BackwardScope();
  ~BackwardScope();
  bool prev;
};

}  // namespace tessera::autograd
