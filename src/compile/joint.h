/** \file
 * Training under compile (research/graph_compiler.md WI-3): the joint graph's split into a
 * forward and a backward graph, and the autograd node through which a compiled forward's results
 * reach the compiled backward.
 *
 * A joint trace runs the function on fake tensors that require grad, then `autograd::grad` on
 * fake gradients with the tracer still installed: the backward formulas' operators (a
 * `triton_op`'s registered backward included) become the graph's later nodes. The split is by
 * time: the nodes recorded before the backward started are the forward, the rest the backward;
 * what the backward reads of the forward's values is saved (the forward returns it after its
 * results). The forward replays without autograd, and one node per call
 * (`CompiledFunctionBackward`) gives its results a history that runs the backward graph.
 */
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compile/capture.h"
#include "compile/executor.h"

namespace tessera::compile_detail {

/**
 * Moves the nodes of `g` from `first_backward` on into a backward graph, whose inputs are the
 * forward values it reads (saved), then `seeds` (one gradient per differentiable result), and
 * whose outputs are `grads` (-1: no gradient). `g` keeps the forward and returns the saved values
 * after its results.
 */
std::unique_ptr<compiler::Graph> split_backward(compiler::Graph& g, size_t first_backward,
                                                const std::vector<int>& seeds,
                                                const std::vector<int>& grads);

/** A backward graph ready to run: shared by every call's autograd node (which may outlive the
 * compiled function). */
class BackwardRunner {
 public:
  explicit BackwardRunner(std::shared_ptr<const BackwardGraph> g);
  const BackwardGraph& graph() const { return *graph_; }
  const Executor& executor() const { return exec_; }
  /** The closed-over tensors (positions in the graph's `captured`) the backward reads: their
   * versions are checked like saved tensors'. */
  const std::vector<size_t>& captured_reads() const { return captured_reads_; }

 private:
  std::shared_ptr<const BackwardGraph> graph_;
  Executor exec_;
  std::vector<size_t> captured_reads_;
};

/**
 * Runs a joint entry's forward graph without autograd and gives its differentiable results a
 * history through one `CompiledFunctionBackward` node (edges to the arguments and closed-over
 * tensors that require grad); returns the function's results (without the saved tensors).
 */
std::vector<IValue> run_with_backward(const std::shared_ptr<const BackwardRunner>& bw,
                                      const Executor& forward, const compiler::Graph& g,
                                      const std::vector<IValue>& args, const Scratch& s,
                                      const std::string& name);

}  // namespace tessera::compile_detail
