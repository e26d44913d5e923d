/** \file
 * CUDA graphs: the work one stream queues while a function runs, captured once and launched again
 * as one unit (`cuGraphLaunch`: one driver call for every kernel and copy of the capture). The
 * graph compiler's `CompileOptions::cuda_graphs` builds on it (compile/cuda_graphs.cpp).
 */
#pragma once

#include <functional>
#include <string>

#include "runtime/cuda/context.h"
#include "runtime/cuda/driver.h"

namespace tessera::runtime::cuda {

/** Whether this driver can capture and launch graphs ("" when it can, else why not). */
std::string graphs_unsupported();

/** Whether this thread is capturing work queued on `stream` into a graph (`Graph::capture`). */
bool capturing(CUstream stream);

/** An instantiated graph (owning). */
class Graph {
 public:
  /**
   * Captures what `body` queues on `stream` (relaxed mode: allocations may happen during the
   * capture) and instantiates it. Nothing runs on the GPU. A capture the driver invalidates (a
   * synchronization, a copy to the host, work on another stream) or an exception from `body`
   * ends the capture and throws a RuntimeError naming `what` and the cause.
   */
  static Graph capture(const Stream& stream, const std::function<void()>& body,
                       const std::string& what);
  Graph() = default;
  Graph(Graph&& o) noexcept;
  Graph& operator=(Graph&& o) noexcept;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  ~Graph();

  /** Queues the whole graph on `stream`. */
  void launch(const Stream& stream) const;
  bool valid() const { return exec_ != nullptr; }

 private:
  void reset();
  int device_ = 0;
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
  std::string what_;
};

}  // namespace tessera::runtime::cuda
