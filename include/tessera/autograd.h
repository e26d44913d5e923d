/** \file
 * Reverse-mode automatic differentiation (DESIGN.md D6), as PyTorch's autograd.
 *
 * A tensor that requires grad records, for every differentiable operator applied to it, a node of
 * the backward graph (its `grad_fn`). `t.backward()` or `autograd::grad(...)` walks that graph
 * from the outputs, calling each node's derivative formula and accumulating gradients into the
 * leaves' `grad()`. Formulas are registered per operator: built-ins through
 * `register_formula`, user operators through `library::custom_op(...).register_autograd(...)`,
 * and both use the same `AutogradContext` (`save_for_backward`, `saved_tensors`,
 * `needs_input_grad`).
 *
 *     Tensor w = randn({3}, TensorOptions().requires_grad(true));
 *     Tensor loss = (w * w).sum();
 *     loss.backward();          // w.grad() == 2 * w
 *
 * Autograd runs as the dispatcher's third level: above dispatch modes (so FLOP counters and the
 * graph compiler see the backward's operators as they run) and below function modes. Tensors
 * saved for backward are checked against their version counter when used: modifying one in place
 * in between is an error naming the operator and the line that saved it.
 */
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/dispatch.h"
#include "tessera/ivalue.h"
#include "tessera/tensor.h"

namespace tessera::autograd {

class Node;

/** Input `input_nr` of backward node `fn` (where a gradient flows). */
struct Edge {
  std::shared_ptr<Node> fn;
  uint32_t input_nr = 0;
  bool valid() const { return fn != nullptr; }
};

/** Shape, dtype and device of a tensor a gradient must match. */
struct TensorMeta {
  SymDimVector sizes;
  DType dtype = DType::Float32;
  Device device;
  bool defined = false;

  static TensorMeta of(const Tensor& t);
  /** A zero tensor of this shape (a missing gradient, materialized). */
  Tensor zeros() const;
};

/** A node of the backward graph: the `grad_fn` of the tensors an operator produced. */
class Node : public std::enable_shared_from_this<Node> {
 public:
  Node();
  virtual ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  /** "MulBackward", "mylib::mysinBackward", "AccumulateGrad". */
  virtual std::string name() const = 0;
  /** Where each input gradient goes (one per differentiable input; invalid edges get none). */
  const std::vector<Edge>& next_edges() const { return next_edges_; }
  /** Creation order; the engine runs later nodes first. */
  uint64_t sequence_nr() const { return sequence_nr_; }
  /** The user's line of the forward call that created the node. */
  const SourceLoc& forward_location() const { return loc_; }

  /** Computes input gradients from output gradients (one per forward output). */
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) = 0;
  /** Drops saved tensors after a backward without `retain_graph`. */
  virtual void release_variables() {}

  /** Metadata of the forward outputs: what the incoming gradients must look like. */
  std::vector<TensorMeta>& output_meta() { return output_meta_; }
  /** Metadata of the forward inputs behind `next_edges()`, one per edge. */
  std::vector<TensorMeta>& input_meta() { return input_meta_; }
  std::vector<Edge>& mutable_next_edges() { return next_edges_; }

 protected:
  void set_forward_location(SourceLoc l) { loc_ = l; }

 private:
  std::vector<Edge> next_edges_;
  std::vector<TensorMeta> output_meta_, input_meta_;
  uint64_t sequence_nr_;
  SourceLoc loc_;
};

/**
 * What a derivative formula keeps between the forward and the backward: saved tensors (checked
 * against their version counters when read), other values by name, and which arguments need a
 * gradient. Formulas of built-in operators and of user operators use the same context.
 */
class AutogradContext {
 public:
  AutogradContext();
  ~AutogradContext();
  AutogradContext(AutogradContext&&) noexcept;
  AutogradContext& operator=(AutogradContext&&) noexcept;

  /** Keeps tensors for the backward (undefined tensors are allowed). */
  void save_for_backward(std::vector<Tensor> tensors);
  /** The saved tensors; an error if one was modified in place since it was saved. */
  std::vector<Tensor> saved_tensors() const;
  /** Saved tensor `i` (as `saved_tensors()[i]`, without unpacking the others). */
  Tensor saved(size_t i) const;

  /** Whether argument `arg` (by position in the operator's schema) needs a gradient. */
  bool needs_input_grad(size_t arg) const;
  /** Non-tensor values: `ctx.set("dim", 1)` in setup, `ctx.get("dim").to_int()` in backward. */
  void set(std::string key, IValue value);
  const IValue& get(std::string_view key) const;

  /** The operator being differentiated ("aten::mul.Tensor"). */
  const std::string& op_name() const;

  struct Impl;
  Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

/** Runs after the forward with the operator's arguments and results (as on its stack). */
using SetupContextFn =
    std::function<void(AutogradContext& ctx, const Stack& inputs, const Stack& outputs)>;
/**
 * Returns one gradient per argument of the operator's schema: a Tensor for a tensor argument,
 * a tensor list for a tensor-list argument, None (an undefined Tensor or empty IValue) where
 * there is none. `grad_outputs` has one tensor per result (zeros where a result got no gradient;
 * undefined for results that are not differentiable, such as indices).
 */
using BackwardFn = std::function<std::vector<IValue>(AutogradContext& ctx,
                                                     const std::vector<Tensor>& grad_outputs)>;

/** Makes `op` differentiable with a formula (replaces an earlier one). */
void register_formula(const OperatorHandle& op, SetupContextFn setup, BackwardFn backward);
void register_formula(std::string_view op, SetupContextFn setup, BackwardFn backward);
/** Marks `op`'s results as never requiring grad (comparisons, integer ops, indices). */
void register_nondifferentiable(std::string_view op);
/** Whether `op` has a formula or is marked non-differentiable. */
bool has_formula(const OperatorHandle& op);
bool is_nondifferentiable(const OperatorHandle& op);

/**
 * Computes the gradients of `tensors` (seeded with `grad_tensors`, or ones for single-element
 * outputs) and accumulates them into the leaves that require grad.
 */
void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors = {},
              bool retain_graph = false, bool create_graph = false, TS_HERE);

/**
 * The gradients of `outputs` with respect to `inputs`, returned instead of accumulated.
 * `allow_unused`: an input the outputs do not depend on gets an undefined tensor instead of an
 * error. `create_graph` records the backward itself, for higher derivatives.
 */
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                         bool create_graph = false, bool allow_unused = false, TS_HERE);

/** Options of `gradcheck`. */
struct GradcheckOptions {
  double eps = 1e-6;   ///< finite-difference step
  double atol = 1e-5;  ///< absolute tolerance
  double rtol = 1e-3;  ///< relative tolerance
  bool raise =
      true;  ///< throw a ValueError describing the first mismatch instead of returning false
};

/**
 * Compares the analytical Jacobian of `fn` (from backward) with central finite differences, for
 * every input that requires grad. Inputs should be float64. As `torch.autograd.gradcheck`.
 */
bool gradcheck(const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
               const std::vector<Tensor>& inputs, GradcheckOptions options = {}, TS_HERE);

/** Whether a backward pass is running on this thread (FLOP counters label its operators). */
bool in_backward();

}  // namespace tessera::autograd
