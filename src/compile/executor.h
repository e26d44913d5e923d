/** \file
 * The executor of a compiled graph: replays its nodes on real arguments (after the guards
 * matched). Operators go through the dispatcher; kernels through their launchers, with their
 * argument lists planned once per node (constants, metas and options filled in; tensors and
 * symbolic integers patched per call); autotuned kernels through their variant source, which
 * picks a variant once per tuning key. A value is dropped after the last node that uses it, so a
 * call's intermediates do not all live to its end.
 */
#pragma once

#include <array>
#include <deque>
#include <functional>
#include <vector>

#include "compile/graph.h"
#include "compile/guards.h"
#include "tl/jit.h"

namespace tessera::compile_detail {

class Executor {
 public:
  Executor(const compiler::Graph& g, const Guards& guards);

  /** A kernel launch about to happen, for an observer (AOT export records specializations). */
  struct LaunchEvent {
    size_t node = 0;
    int variant = -1;  ///< an autotuned launch: the candidate (the tuner's last call wins)
    ArrayRef<tl::KernelArg> args;
    const std::vector<std::pair<size_t, int>>* tensors = nullptr;  ///< (argument, value id)
    const std::vector<std::pair<size_t, SymRef>>* ints = nullptr;  ///< (argument, integer)
    const SymRef* grid = nullptr;                                  ///< 3
    const tl::Variant* candidate = nullptr;  ///< an autotuned launch: its candidate
  };
  using Observer = std::function<void(const LaunchEvent&)>;
  /** Called after each operator node ran, with the node's index. */
  using OpObserver = std::function<void(size_t node)>;

  /** Stand-ins for this call's kernel launches, for tl::detail::prebuild: tensors without data
   * with each value's dtype, device, sizes and strides at this call's sizes (the call's own
   * tensors where `args` has them), the launches' other arguments as they will be. */
  struct PendingBuilds {
    std::deque<Tensor> tensors;
    std::deque<SmallVector<tl::KernelArg, 16>> args;
    std::vector<tl::detail::PendingBuild> launches;
  };
  void pending_builds(const std::vector<IValue>* args, const Scratch& s, PendingBuilds& out) const;

  /** Runs the graph (after `guards.match(args, s, ...)` passed); `observe`, when given, sees
   * every kernel launch before it runs, and `after_op` every operator node after it ran. */
  std::vector<IValue> run(const std::vector<IValue>& args, const Scratch& s,
                          const Observer* observe = nullptr,
                          const OpObserver* after_op = nullptr) const;

 private:
  /** A kernel node's launch arguments, built once. */
  struct KernelPlan {
    std::vector<tl::KernelArg> args;
    std::vector<std::pair<size_t, int>> tensors;  ///< (argument, value id)
    std::vector<std::pair<size_t, SymRef>> ints;  ///< (argument, integer)
    SymRef grid[3];
    std::vector<std::array<SymRef, 3>> variant_grids;  ///< autotuned launches: per variant
    std::vector<tl::Variant> cands;
  };

  void plan_kernels();
  void run_tuned(const compiler::Node& n, const KernelPlan& plan, ArrayRef<tl::KernelArg> args,
                 const Scratch& s, const Observer* observe) const;

  void plan_lifetimes();
  /** A planned allocation (Node::arena): the tensor at its offset in this call's arena. */
  Tensor arena_tensor(const compiler::Node& n, const Scratch& s,
                      ArrayRef<IntrusivePtr<StorageImpl>> arenas) const;

  const compiler::Graph& graph_;
  const Guards& guards_;
  std::vector<KernelPlan> kernel_plans_;  ///< per node (empty for other nodes)
  /** Per node: the values no later node uses (not the graph's inputs or results), dropped as
   * soon as it ran, so that their memory goes back to the allocator and serves later nodes. */
  std::vector<std::vector<int>> drop_after_;
  std::vector<SymRef> arena_bytes_;   ///< per arena of the graph's memory plan
  std::vector<SymRef> arena_offset_;  ///< per node (planned allocations)
};

}  // namespace tessera::compile_detail
