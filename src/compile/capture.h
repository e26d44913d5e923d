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
  bool plan_memory = true;                                      ///< as CompileOptions::plan_memory
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

/** The passes of a traced graph (`fuse_builtins`: built-in ops may become generated kernels;
 * `plan_memory`: its intermediates are placed in arenas). */
void optimize_graph(compiler::Graph& g, bool fuse, bool fuse_builtins, bool plan_memory);

/**
 * The compiled segments of a function that breaks (segmented mode, compile/segments.cpp): graphs
 * keyed by their traced structure, so that a call whose segment traces to a known graph runs its
 * compiled form. Thread-safe.
 */
class SegmentCache {
 public:
  /** `limit`: graphs per segment position (the function's recompile_limit + 1). */
  SegmentCache(std::string name, bool fuse, bool plan_memory, int limit);
  ~SegmentCache();
  SegmentCache(const SegmentCache&) = delete;
  SegmentCache& operator=(const SegmentCache&) = delete;

  /** Runs segment `site` (0-based, in call order) of a call: `traced` (as recorded; its outputs
   * set) on `inputs` (aligned with its inputs). A graph of the same structure compiled before
   * runs; else this one is optimized and kept, unless the position has `limit` graphs already
   * (then it runs as recorded and `exhausted()` turns true). `ends_at` names the break. */
  std::vector<IValue> run(std::unique_ptr<compiler::Graph> traced, size_t site,
                          const std::vector<IValue>& inputs, const std::string& ends_at);
  /** A segment position ran out of graphs: later calls should run the function eagerly. */
  bool exhausted() const;
  /** The compiled segments, oldest first. */
  std::vector<CompiledGraph> graphs() const;
  size_t size() const;
  /** The newest segment graph, printed ("" when none). */
  std::string last_graph() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/** One call of a function in segments (a graph break without `fullgraph`): `fn` runs on traced
 * stand-ins of `args`; where it reads tensor data (`item()`, `data_ptr()`, `equal`) or calls an
 * operator that cannot be traced, the graph traced so far runs compiled (from `cache`) on the
 * real tensors, the read or the operator runs on real ones, and tracing goes on into the next
 * segment. The results are real tensors. */
std::vector<IValue> run_segmented(const Traced& fn, const std::vector<IValue>& args,
                                  SegmentCache& cache, const CaptureOptions& opts);

}  // namespace tessera::compile_detail
