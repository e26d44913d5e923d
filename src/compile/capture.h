/** \file
 * Capture (DESIGN D5, D12): tracing a function on fake tensors into a graph. Operator calls
 * become nodes; kernel launches (the kernel_launch operator) become kernel nodes with their
 * variants, exact write sets and symbolic grids; `triton_op` bodies are traced into; reading
 * tensor data is a graph break. The arguments' leaf guards are made on the way.
 */
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "compile/graph.h"
#include "compile/guards.h"
#include "tessera/compile.h"

namespace tessera::compile_detail {

/** Something the trace cannot capture (a graph break). */
class GraphBreakError : public CompileError {
 public:
  using CompileError::CompileError;
};

struct CaptureOptions {
  std::string name;
  std::optional<bool> dynamic;                                  ///< as CompileOptions::dynamic
  const std::set<std::pair<int, int>>* dynamic_dims = nullptr;  ///< (tensor argument, dim)
  bool fuse = true;                                             ///< as CompileOptions::fuse
  /** With grad enabled and a tensor that requires grad: trace the backward too (one joint
   * graph below autograd), split into a forward that also returns what the backward reads and
   * a backward graph (training under compile). Without it, operators stay as called so that
   * autograd records them when the graph replays. */
  bool joint = false;
};

/**
 * The backward of a joint trace: a graph whose inputs are the tensors the forward saved, then
 * one gradient per differentiable result, and whose outputs are the gradients of the inputs that
 * require grad. Its sizes are expressions of the forward's symbols (`guards` computes them).
 */
struct BackwardGraph {
  std::unique_ptr<compiler::Graph> graph;
  Guards guards;            ///< no leaves: the program of the backward's sizes and grids
  size_t user_outputs = 0;  ///< the forward graph's outputs after these are the saved tensors
  /** Per gradient input of the backward: the position of its result among the function's. */
  std::vector<size_t> diff_outputs;
  /** Per backward output: the tensor argument it is the gradient of (its position among the
   * arguments), or -1 - c for the closed-over tensor `graph->captured[c]` of the forward. */
  std::vector<int> grad_targets;
};

struct Captured {
  std::unique_ptr<compiler::Graph> graph;
  Guards guards;                                  ///< finished (the program built)
  std::shared_ptr<const BackwardGraph> backward;  ///< joint traces with a differentiable result
};

/** Traces `fn` on fakes of `args` into an optimized graph and its guards; a GraphBreakError
 * where the trace cannot continue. */
Captured capture(const Traced& fn, const std::vector<IValue>& args, const CaptureOptions& opts);

}  // namespace tessera::compile_detail
