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
};

struct Captured {
  std::unique_ptr<compiler::Graph> graph;
  Guards guards;  ///< finished (the program built)
};

/** Traces `fn` on fakes of `args` into an optimized graph and its guards; a GraphBreakError
 * where the trace cannot continue. */
Captured capture(const Traced& fn, const std::vector<IValue>& args, const CaptureOptions& opts);

}  // namespace tessera::compile_detail
