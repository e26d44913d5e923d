/** \file
 * CUDA graphs of a compiled graph (`CompileOptions::cuda_graphs`): per call sizes, the graph's
 * GPU work captured once and then replayed with one `cuGraphLaunch`, instead of a launch (and
 * its host work) per kernel.
 *
 * The captured work reads its arguments from static copies and writes its results into static
 * buffers, all allocated on a stream of its own (so that no other allocation can take their
 * memory while the graph lives): a replay copies the call's arguments in, launches the graph and
 * copies the results out into fresh tensors (a result of an earlier call is never overwritten).
 * A size is captured on its second call (the first builds and tunes its kernels). What cannot be
 * replayed is refused with the reason (`TESSERA_LOGS=cuda_graphs`) and runs as before: tensors on
 * the CPU or on two GPUs, random or data-dependent operators, custom operators (opaque host code),
 * writes to arguments, results that are arguments or views of them, training graphs; a capture the
 * driver invalidates (a host synchronization inside) refuses its size.
 */
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "compile/executor.h"
#include "compile/graph.h"
#include "compile/guards.h"

namespace tessera::compile_detail {

class CudaGraphs {
 public:
  /** Why `g` cannot be replayed from a CUDA graph ("" when it can). */
  static std::string refusal(const compiler::Graph& g);

  CudaGraphs(const compiler::Graph& g, const Executor& ex, std::string name);
  ~CudaGraphs();
  CudaGraphs(const CudaGraphs&) = delete;
  CudaGraphs& operator=(const CudaGraphs&) = delete;

  /** The call through this size's CUDA graph (capturing it on its second call); nullopt where
   * the caller runs the executor instead (the first call of a size, or a refused size). */
  std::optional<std::vector<IValue>> run(const std::vector<IValue>& args, const Scratch& s);

  /** Sizes captured so far. */
  int captured() const;

 private:
  struct Captured;
  std::unique_ptr<Captured> capture(const std::vector<IValue>& args, const Scratch& s);

  const compiler::Graph& graph_;
  const Executor& executor_;
  std::string name_;
  int device_ = 0;
  mutable std::mutex mutex_;
  std::map<std::vector<int64_t>, std::unique_ptr<Captured>> graphs_;  ///< by the call's symbols
  std::map<std::vector<int64_t>, int> calls_;                         ///< before capture
  std::map<std::vector<int64_t>, std::string> refused_;
};

}  // namespace tessera::compile_detail
