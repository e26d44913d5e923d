/** \file
 * A kernel launch is an operator (DESIGN.md D12): `tessera::kernel_launch(int launch,
 * Tensor(a!)[] tensors) -> ()`, PyTorch's `triton_kernel_wrapper_mutation`. When a function mode,
 * a dispatch mode or a wrapper tensor is active, `Launcher::run` calls it through the dispatcher,
 * so graph capture, FLOP counting, fake and meta tensors and wrapper types see launches as they
 * see any operator; otherwise the launch runs directly (the hot path boxes nothing).
 *
 * The `launch` integer names the launch being dispatched (a per-thread stack: the launcher with
 * its grid and tuner, and the arguments); `tensors` are its tensor arguments in order, which a
 * wrapper type's handler may replace by its inner tensors. Modes read both with `launch_of`.
 */
#pragma once

#include <memory>
#include <vector>

#include "ir/cost.h"
#include "tessera/dispatch.h"
#include "tessera/tl.h"

namespace tessera::tl {

/** The kernel launch operator. */
const OperatorHandle& kernel_launch_op();
/** Whether `op` is the kernel launch operator. */
bool is_kernel_launch(const OperatorHandle& op);

/** A launch as a mode sees it: the launcher (kernel, grid or grid callable, tuner) and the
 * launch's arguments with the tensors of the operator's stack. */
struct LaunchView {
  const Launcher* launcher = nullptr;
  std::vector<Tensor> tensors;  ///< owned here; `args`' tensor pointers point into it
  std::vector<KernelArg> args;
};
/** The launch the kernel_launch operator's arguments at the top of `stack` describe. */
LaunchView launch_of(const Stack& stack);

/** What a dispatched launch ran (its last kernel run: the chosen config of a tuned launch), for
 * FLOP counting; `function` is null when nothing ran (tensors without data, an empty grid). */
struct LaunchRecord {
  std::string kernel;
  std::shared_ptr<const ir::Function> function;
  std::vector<ir::ParamValue> params;
  int64_t grid[3] = {1, 1, 1};
};
/** The record of the launch described by `stack` (read after the call returned). */
LaunchRecord launch_record(const Stack& stack);

namespace detail {
/** Whether a launch must go through the dispatcher (a mode or a wrapper tensor is active). */
bool launch_needs_dispatch(ArrayRef<KernelArg> args);
/** Calls the kernel launch operator for `launcher` with `args`. */
void dispatch_launch(const Launcher& launcher, ArrayRef<KernelArg> args);
/** Called by `Launcher::run_kernel` after a kernel ran: records it for the dispatched launch in
 * progress on this thread, if any. */
void record_run(const std::string& kernel, const std::shared_ptr<const ir::Function>& f,
                const std::vector<ir::ParamValue>& params, const int64_t grid[3]);
bool recording();
}  // namespace detail

}  // namespace tessera::tl
