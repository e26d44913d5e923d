// tessera::compile: the cache of guarded graphs of one compiled function, with automatic dynamic
// shapes and explained recompiles. Capture (tracing into a graph), guards and the executor are
// compile/capture, compile/guards and compile/executor.
#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "compile/capture.h"
#include "compile/cuda_graphs.h"
#include "compile/executor.h"
#include "compile/graph.h"
#include "compile/guards.h"
#include "compile/joint.h"
#include "tessera/compile.h"
#include "tessera/env.h"

namespace tessera::compile_detail {

using namespace tessera::compiler;

namespace {

/** A compiled graph: its guards and its executor. */
struct Entry {
  std::unique_ptr<Graph> graph;
  Guards guards;
  std::unique_ptr<Executor> executor;
  std::shared_ptr<const BackwardRunner> backward;  ///< a joint trace's (training under compile)
  std::unique_ptr<CudaGraphs> cuda_graphs;         ///< CompileOptions::cuda_graphs
  mutable std::atomic<bool> prebuilt{false};

  std::vector<IValue> run(const std::vector<IValue>& args, const Scratch& s,
                          const std::string& name) const {
    if (!prebuilt.exchange(true, std::memory_order_relaxed)) prebuild(args, s);
    if (cuda_graphs) {
      if (auto out = cuda_graphs->run(args, s)) return std::move(*out);
    }
    if (!backward) return executor->run(args, s);
    return run_with_backward(backward, *executor, *graph, args, s, name);
  }

  /** The first call builds every kernel of the graph, and of its backward, in one batch (their
   * compiles in parallel) before the first launch needs one; later sizes build per launch. */
  void prebuild(const std::vector<IValue>& args, const Scratch& s) const {
    Executor::PendingBuilds p;
    try {
      executor->pending_builds(&args, s, p);
      if (backward) {
        Scratch bs;
        bs.symbols = s.symbols;
        if (backward->graph().guards.evaluate(bs))
          backward->executor().pending_builds(nullptr, bs, p);
      }
    } catch (const std::exception&) {
      // (a size that cannot be computed yet: what was gathered is built, the rest per launch)
    }
    if (p.launches.size() > 1) tl::detail::prebuild(p.launches);
  }
};

/** The guarded graphs of one compiled function: an append-only list that callers read without a
 * lock while one thread at a time appends (under the function's miss lock). Readers load the size,
 * then the array; an array is published before any size that counts its new slot, and replaced
 * arrays are kept until the list dies, so a reader never sees a slot that is not filled. */
class EntryList {
 public:
  size_t size() const { return size_.load(std::memory_order_acquire); }
  const Entry& operator[](size_t i) const { return *items_.load(std::memory_order_acquire)[i]; }
  const Entry& back() const { return (*this)[size() - 1]; }

  /** Appends (the caller holds the miss lock). */
  const Entry& push_back(std::unique_ptr<Entry> e) {
    const size_t n = size_.load(std::memory_order_relaxed);
    if (n == capacity_) {
      capacity_ = capacity_ ? 2 * capacity_ : 4;
      auto grown = std::make_unique<Entry*[]>(capacity_);
      for (size_t i = 0; i < n; ++i) grown[i] = arrays_.back()[i];
      items_.store(grown.get(), std::memory_order_release);
      arrays_.push_back(std::move(grown));
    }
    Entry* raw = e.get();
    owned_.push_back(std::move(e));
    arrays_.back()[n] = raw;
    size_.store(n + 1, std::memory_order_release);
    return *raw;
  }

 private:
  std::atomic<Entry* const*> items_{nullptr};
  std::atomic<size_t> size_{0};
  size_t capacity_ = 0;
  std::vector<std::unique_ptr<Entry*[]>> arrays_;  ///< the current one last
  std::vector<std::unique_ptr<Entry>> owned_;
};

/** One call's scratch (guard symbols, size and grid values) from a per-thread stack: a compiled
 * function called from inside another's graph (a custom op's kernel) gets a level of its own.
 * Levels are allocated once per depth, so a hot call allocates nothing. */
struct ScratchLease {
  ScratchLease() : scratch(acquire()) {}
  ~ScratchLease() { --stack().depth; }
  ScratchLease(const ScratchLease&) = delete;
  ScratchLease& operator=(const ScratchLease&) = delete;
  Scratch& scratch;

 private:
  struct Stack {
    std::vector<std::unique_ptr<Scratch>> levels;
    size_t depth = 0;
  };
  static Stack& stack() {
    thread_local Stack s;
    return s;
  }
  static Scratch& acquire() {
    Stack& s = stack();
    if (s.depth == s.levels.size()) s.levels.push_back(std::make_unique<Scratch>());
    return *s.levels[s.depth++];
  }
};

}  // namespace

class CompiledFunction {
 public:
  CompiledFunction(CompileOptions o, Traced fn, SourceLoc loc)
      : opts_(std::move(o)), fn_(std::move(fn)), loc_(loc) {
    if (opts_.name.empty()) opts_.name = "compiled function";
    for (auto [leaf, dim] : opts_.dynamic_dims) dynamic_.insert({leaf, dim});
  }

  std::vector<IValue> call(const std::vector<IValue>& args) {
    if (eager_.load(std::memory_order_acquire)) return fn_(args);
    if (segmented_.load(std::memory_order_acquire)) return call_segmented(args);
    ScratchLease lease;  // this call's own sizes and grids (a graph node may call another)
    Scratch& s = lease.scratch;
    const size_t seen = entries_.size();
    for (size_t i = 0; i < seen; ++i) {
      if (const Entry& e = entries_[i]; e.guards.match(args, s, nullptr))
        return e.run(args, s, opts_.name);
    }
    // A miss: one thread at a time explains it, learns dynamic dimensions and compiles again.
    std::unique_lock<std::recursive_mutex> lock(miss_mutex_);  // recursive: fn may call itself
    if (eager_.load(std::memory_order_relaxed)) {
      lock.unlock();
      return fn_(args);
    }
    for (size_t i = seen; i < entries_.size(); ++i) {  // compiled meanwhile by another thread
      if (const Entry& e = entries_[i]; e.guards.match(args, s, nullptr)) {
        lock.unlock();
        return e.run(args, s, opts_.name);
      }
    }
    std::string why;
    if (entries_.size() > 0) {
      entries_.back().guards.match(args, s, &why);
      ++recompiles_;
      if (knobs().log_enabled("recompiles")) {
        log("recompiles", opts_.name + " #" + std::to_string(entries_.size() + 1) + ": " + why);
      }
      if (recompiles_ > opts_.recompile_limit) {
        TS_CHECK(!opts_.fullgraph, CompileError)
            << "[" << opts_.name
            << "] recompiled more than recompile_limit=" << opts_.recompile_limit
            << " times; the last guard that failed: " << why;
        warn_once("tessera::compile: " + opts_.name +
                  " hit recompile_limit=" + std::to_string(opts_.recompile_limit) +
                  " (last failed guard: " + why + "); running it eagerly from now on");
        eager_.store(true, std::memory_order_release);
        lock.unlock();
        return fn_(args);
      }
      if (opts_.dynamic != false) learn_dynamic(entries_.back(), args);
    }
    std::unique_ptr<Entry> entry;
    try {
      entry = compile_entry(args);
    } catch (const GraphBreakError& e) {
      if (opts_.fullgraph)
        throw CompileError("[" + opts_.name + "] " + e.message() + " (fullgraph=true)",
                           e.user_loc());
      log("graph_breaks", opts_.name + ": " + e.what() +
                              "; running it in segments (compiled graphs between the breaks)");
      segments_ = std::make_unique<SegmentCache>(opts_.name, opts_.fuse, opts_.plan_memory,
                                                 opts_.recompile_limit + 1);
      segmented_.store(true, std::memory_order_release);
      lock.unlock();
      return call_segmented(args);
    }
    TS_INTERNAL_ASSERT(entry->guards.match(args, s, &why))
        << opts_.name << ": a fresh graph fails its own guards: " << why;
    const Entry& e = entries_.push_back(std::move(entry));
    lock.unlock();
    return e.run(args, s, opts_.name);
  }

  // A function that breaks: traced on every call, its segments compiled once per structure
  // (capture.h run_segmented). A trace that cannot go on runs the function eagerly.
  std::vector<IValue> call_segmented(const std::vector<IValue>& args) {
    CaptureOptions co;
    co.name = opts_.name;
    co.fuse = opts_.fuse;
    co.plan_memory = opts_.plan_memory;
    co.dynamic = opts_.dynamic;
    std::set<std::pair<int, int>> dims;
    {
      std::lock_guard<std::recursive_mutex> lock(miss_mutex_);
      if (opts_.dynamic != false) learn_segment_sizes(args);
      dims = dynamic_;
    }
    co.dynamic_dims = &dims;
    std::vector<IValue> out;
    try {
      out = run_segmented(fn_, args, *segments_, co);
    } catch (const DataError& e) {
      // A read the segments cannot serve (tensor data on another thread, ...): mid-call, what
      // ran cannot be undone, so this call fails; later calls run eagerly.
      log("graph_breaks", opts_.name + ": " + e.what() + "; running the function eagerly");
      eager_.store(true, std::memory_order_release);
      throw CompileError("[" + opts_.name +
                             "] a segmented call read tensor data it cannot serve (" + e.message() +
                             "); the function runs eagerly from its next call",
                         e.user_loc());
    }
    if (segments_->exhausted()) eager_.store(true, std::memory_order_release);
    return out;
  }

  bool guards_pass(const std::vector<IValue>& args) const {
    ScratchLease lease;
    const size_t n = entries_.size();
    for (size_t i = 0; i < n; ++i) {
      if (entries_[i].guards.match(args, lease.scratch, nullptr)) return true;
    }
    return false;
  }

  Stats stats() const {
    std::lock_guard<std::recursive_mutex> lock(miss_mutex_);
    Stats st;
    st.graphs = static_cast<int>(entries_.size());
    st.recompiles = recompiles_;
    st.eager = eager_.load();
    st.segmented = segmented_.load();
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (entries_[i].cuda_graphs) st.cuda_graphs += entries_[i].cuda_graphs->captured();
    }
    if (segments_) {
      st.graphs += static_cast<int>(segments_->size());
      st.last_graph = segments_->last_graph();
    }
    if (entries_.size() > 0 && !segments_) {
      st.last_graph = entries_.back().graph->str();
      if (entries_.back().backward) st.last_graph += entries_.back().backward->graph().graph->str();
    }
    return st;
  }

  std::vector<CompiledGraph> graphs() const {
    std::lock_guard<std::recursive_mutex> lock(miss_mutex_);
    std::vector<CompiledGraph> all;
    for (size_t i = 0; i < entries_.size(); ++i) {
      const Entry& e = entries_[i];
      all.push_back(e.graph->data());
      if (e.backward) {
        const BackwardGraph& b = e.backward->graph();
        all.back().user_outputs = static_cast<int>(b.user_outputs);
        all.back().backward = std::make_shared<const CompiledGraph>(b.graph->data());
      }
    }
    if (segments_) {
      for (CompiledGraph& g : segments_->graphs()) all.push_back(std::move(g));
    }
    return all;
  }

  [[noreturn]] void no_graph_yet() const {
    std::lock_guard<std::recursive_mutex> lock(miss_mutex_);
    throw CompileError("[" + opts_.name + "] has no compiled graph" +
                           (eager_.load() ? " (it runs eagerly: see TESSERA_LOGS=graph_breaks)"
                                          : " yet: call it first"),
                       loc_);
  }

 private:
  void learn_dynamic(const Entry& last, const std::vector<IValue>& args) {
    size_t tensor_index = 0;
    for (size_t i = 0; i < last.guards.leaves.size() && i < args.size(); ++i) {
      const LeafGuard& g = last.guards.leaves[i];
      if (!g.tensor) continue;
      const size_t k = tensor_index++;
      if (!args[i].is_tensor() || !args[i].to_tensor().defined()) continue;
      const Tensor& t = args[i].to_tensor();
      if (t.dim() != g.dim) continue;
      for (int64_t d = 0; d < g.dim; ++d) {
        const int64_t now = t.impl()->int_sizes()[d];
        if (g.size_symbol[static_cast<size_t>(d)] < 0 && now != g.sizes[static_cast<size_t>(d)]) {
          dynamic_.insert({static_cast<int>(k), static_cast<int>(d)});
        }
      }
    }
  }

  // Segmented mode's automatic dynamic shapes: a dimension of a tensor argument whose size differs
  // from the first segmented call's is symbolic from then on (under miss_mutex_).
  void learn_segment_sizes(const std::vector<IValue>& args) {
    size_t k = 0;
    for (const IValue& a : args) {
      if (!a.is_tensor() || !a.to_tensor().defined()) continue;
      const auto sizes = a.to_tensor().impl()->int_sizes();
      if (k == segment_sizes_.size()) segment_sizes_.emplace_back(sizes.begin(), sizes.end());
      const std::vector<int64_t>& first = segment_sizes_[k];
      for (size_t d = 0; d < sizes.size() && d < first.size(); ++d) {
        if (sizes[d] != first[d]) dynamic_.insert({static_cast<int>(k), static_cast<int>(d)});
      }
      ++k;
    }
  }

  std::unique_ptr<Entry> compile_entry(const std::vector<IValue>& args) {
    CaptureOptions co;
    co.name = opts_.name;
    co.dynamic = opts_.dynamic;
    co.dynamic_dims = &dynamic_;
    co.fuse = opts_.fuse;
    co.plan_memory = opts_.plan_memory;
    co.joint = true;
    Captured c = capture(fn_, args, co);
    auto e = std::make_unique<Entry>();
    e->graph = std::move(c.graph);
    e->guards = std::move(c.guards);
    e->executor = std::make_unique<Executor>(*e->graph, e->guards);
    if (c.backward) e->backward = std::make_shared<const BackwardRunner>(std::move(c.backward));
    if (opts_.cuda_graphs) {
      const std::string why = e->backward ? "it is a training graph (its backward runs apart)"
                                          : CudaGraphs::refusal(*e->graph);
      if (why.empty()) {
        e->cuda_graphs = std::make_unique<CudaGraphs>(*e->graph, *e->executor, opts_.name);
      } else {
        log("cuda_graphs", opts_.name + ": not replayed from CUDA graphs: " + why);
      }
    }
    return e;
  }

  CompileOptions opts_;
  Traced fn_;
  SourceLoc loc_;
  EntryList entries_;  ///< read without a lock; appended under miss_mutex_
  mutable std::recursive_mutex miss_mutex_;
  std::set<std::pair<int, int>> dynamic_;  ///< under miss_mutex_
  int recompiles_ = 0;                     ///< under miss_mutex_
  std::atomic<bool> eager_{false};
  std::atomic<bool> segmented_{false};
  std::unique_ptr<SegmentCache> segments_;  ///< set once, under miss_mutex_, before segmented_
  std::vector<std::vector<int64_t>> segment_sizes_;  ///< under miss_mutex_: the first call's
};

std::shared_ptr<CompiledFunction> make_compiled(CompileOptions options, Traced fn, SourceLoc loc) {
  return std::make_shared<CompiledFunction>(std::move(options), std::move(fn), loc);
}

std::vector<IValue> call_compiled(CompiledFunction& f, const std::vector<IValue>& args) {
  return f.call(args);
}

Stats stats(const CompiledFunction& f) {
  return f.stats();
}

std::vector<CompiledGraph> graphs(const CompiledFunction& f) {
  return f.graphs();
}

void no_graph_yet(const CompiledFunction& f) {
  f.no_graph_yet();
}

bool guards_pass(const CompiledFunction& f, const std::vector<IValue>& args) {
  return f.guards_pass(args);
}

}  // namespace tessera::compile_detail

namespace tessera {

std::vector<const CompiledGraph::Node*> CompiledGraph::find(const std::string& target) const {
  std::vector<const Node*> found;
  for (const Node& n : nodes) {
    // (an operator run as its .out overload: by the name called, with or without its overload)
    const bool called = !n.planned_from.empty() &&
                        (n.planned_from == target || n.planned_from.rfind(target + ".", 0) == 0);
    if (n.target == target || called) found.push_back(&n);
  }
  return found;
}

int CompiledGraph::kernel_launches() const {
  int k = 0;
  for (const Node& n : nodes) k += n.kind == Node::Kind::Kernel;
  return k;
}

}  // namespace tessera
