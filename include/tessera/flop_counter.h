/** \file
 * Counting floating-point operations (torch.utils.flop_counter): `register_flop_formula` declares
 * an operator's count from its shapes; `FlopCounterMode` counts every operator call while it is
 * alive, forward and backward, and prints a table when it ends.
 *
 *     register_flop_formula("mylib::mysin", [](const std::vector<Shape>& in) { return numel(in[0]);
 * });
 *     {
 *       FlopCounterMode counter;            // prints on destruction
 *       Tensor y = mysin(x);
 *     }
 *
 * Beyond the peers, whose counters count 0 for a custom kernel without a formula: when an
 * operator has no formula, every tile kernel it launches is counted from the kernel's IR at its
 * launch sizes (`ir/cost.h`: FLOPs and bytes moved), and the table says which counts were
 * declared and which derived. Kernels launched outside any operator are counted under their own
 * name.
 */
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "tessera/dispatch.h"

namespace tessera {

using Shape = std::vector<int64_t>;

/** The product of a shape's sizes. */
int64_t numel(const Shape& s);

/** A FLOP formula over the shapes of the operator's tensor arguments and tensor results (in
 * schema order; an absent optional tensor is skipped). */
using FlopFormula =
    std::function<int64_t(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs)>;
/** A FLOP formula over the boxed arguments and results themselves (`get_raw=True`). */
using RawFlopFormula = std::function<int64_t(const Stack& inputs, const Stack& outputs)>;

void register_flop_formula(std::string_view op, FlopFormula f);
void register_raw_flop_formula(std::string_view op, RawFlopFormula f);
/** Also accepts `f(inputs)` (the seed's `def _(x_shape)`). */
template <class F>
requires(
    std::is_invocable_r_v<int64_t, F&, const std::vector<Shape>&> &&
    !std::is_invocable_v<F&, const std::vector<Shape>&,
                         const std::vector<Shape>&>) void register_flop_formula(std::string_view op,
                                                                                F f) {
  register_flop_formula(
      op, FlopFormula([f = std::move(f)](const std::vector<Shape>& in, const std::vector<Shape>&) {
        return static_cast<int64_t>(f(in));
      }));
}
/** Whether `op` has a declared FLOP formula. */
bool has_flop_formula(const OperatorHandle& op);

/**
 * Counts FLOPs of every operator called on this thread while it lives (a dispatch mode, below
 * autograd, so it sees the backward's operators too). Counts are kept per scope (a `Scope` is the
 * analogue of a module); a scope's counts include its nested scopes'.
 */
class FlopCounterMode : public DispatchMode {
 public:
  struct Options {
    int depth = 2;                ///< scope levels shown in the table
    bool display = true;          ///< print the table when the counter ends
    std::ostream* out = nullptr;  ///< where to print (default std::cout)
  };
  /** Counts of one operator within one scope. */
  struct OpCount {
    int64_t forward_flops = 0, backward_flops = 0;
    double bytes = 0;  ///< bytes loaded and stored by derived (kernel) counts
    int64_t calls = 0;
    bool declared = false;  ///< from a registered formula
    bool derived = false;   ///< from launched kernels' IR
    bool inexact = false;   ///< a derived count with loop bounds it could not evaluate
    int64_t flops() const { return forward_flops + backward_flops; }
  };

  FlopCounterMode();
  explicit FlopCounterMode(Options options);
  ~FlopCounterMode() override;
  FlopCounterMode(const FlopCounterMode&) = delete;
  FlopCounterMode& operator=(const FlopCounterMode&) = delete;

  int64_t get_total_flops() const;
  /** scope -> operator -> FLOPs (forward plus backward); the outermost scope is "Global". */
  std::map<std::string, std::map<std::string, int64_t>> get_flop_counts() const;
  /** scope -> operator -> counts. */
  const std::map<std::string, std::map<std::string, OpCount>>& counts() const;
  /** The table the counter prints. */
  std::string table() const;

  /** A named region of counting, nested in the current one (RAII). */
  class Scope {
   public:
    explicit Scope(std::string name);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
  };

  void handle(const OperatorHandle& op, Stack& stack) override;

  struct Impl;

 private:
  void run_visible(const OperatorHandle& op, Stack& stack);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera
