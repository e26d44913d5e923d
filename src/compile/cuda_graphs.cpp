// CUDA graphs of a compiled graph (cuda_graphs.h).
#include "compile/cuda_graphs.h"

#include <array>
#include <cstring>
#include <set>

#include "runtime/cuda/context.h"
#include "runtime/cuda/graph.h"
#include "tessera/dispatch.h"
#include "tessera/env.h"

namespace tessera::compile_detail {

using namespace tessera::compiler;
namespace rc = tessera::runtime::cuda;

struct CudaGraphs::Captured {
  rc::Stream stream;            ///< its own: the allocations of the capture are on it
  std::vector<Tensor> inputs;   ///< static copies of the tensor arguments (per argument)
  std::vector<IValue> outputs;  ///< the results as the captured work writes them
  rc::Graph graph;
  std::unique_ptr<rc::Event> done;  ///< recorded after each replay
  rc::CUstream last = nullptr;      ///< the stream of the last replay
  bool replayed = false;
  /** The closed-over CPU numbers (0-dim CPU tensors: kernel parameters, so their values are in
   * the graph) and their bytes at the capture. */
  std::vector<std::pair<Tensor, std::array<unsigned char, 8>>> numbers;
};

namespace {

// A closed-over 0-dim CPU tensor (`2.0 / t`'s number as a tensor): a GPU operator takes its value
// as a kernel parameter, so a graph holds the value it had at the capture.
bool host_number(const Tensor& t) {
  return t.defined() && t.device().is_cpu() && t.dim() == 0 && t.itemsize() <= 8;
}

std::array<unsigned char, 8> bytes_of(const Tensor& t) {
  std::array<unsigned char, 8> b{};
  std::memcpy(b.data(), t.data_ptr(), t.itemsize());
  return b;
}

}  // namespace

std::string CudaGraphs::refusal(const Graph& g) {
  std::set<int> numbers;  // closed-over CPU numbers: checked at each replay (`numbers`)
  for (size_t c = 0; c < g.captured.size(); ++c) {
    if (host_number(g.captured[c])) numbers.insert(g.captured_values[c]);
  }
  int device = -2;
  for (const Value& v : g.values) {
    if (v.kind != Value::Kind::Tensor || numbers.count(static_cast<int>(&v - g.values.data())))
      continue;
    if (!v.tensor.device.is_cuda())
      return "it has a tensor on " + v.tensor.device.str() + " (work a CUDA graph cannot replay)";
    const int d = v.tensor.device.index() < 0 ? 0 : v.tensor.device.index();
    if (device != -2 && d != device) return "its tensors are on two GPUs";
    device = d;
  }
  if (device == -2) return "it has no tensor on a GPU";
  std::set<int> argument_storages;
  for (int v : g.inputs) {
    if (v >= 0) argument_storages.insert(g.values[static_cast<size_t>(v)].tensor.storage);
  }
  for (const Node& n : g.nodes) {
    if (n.dead) continue;
    const std::string what =
        n.kind == Node::Kind::Kernel ? "kernel " + n.kernel->name() : "operator " + n.op.name();
    if (n.kind == Node::Kind::Extern)
      return what + " is a custom operator (host code a replay would skip)";
    if (n.kind == Node::Kind::Op && (n.op.entry().tags() & (kTagRandom | kTagDataDependent)))
      return what + " is random or reads tensor data on the host";
    for (int w : n.writes) {
      if (argument_storages.count(g.values[static_cast<size_t>(w)].tensor.storage))
        return what + " writes an argument (a replay writes its static copy)";
    }
  }
  std::set<int> closed_over, results;
  for (int v : g.captured_values)
    closed_over.insert(g.values[static_cast<size_t>(v)].tensor.storage);
  for (int v : g.outputs) {
    if (v < 0) continue;
    const int storage = g.values[static_cast<size_t>(v)].tensor.storage;
    // (a replay returns copies of the results: what is the caller's own, or shared between two
    // results, would come back as a new tensor)
    if (argument_storages.count(storage) || closed_over.count(storage))
      return "a result is an argument or a closed-over tensor, or a view of one";
    if (!results.insert(storage).second) return "two results share memory";
  }
  return rc::graphs_unsupported();
}

CudaGraphs::CudaGraphs(const Graph& g, const Executor& ex, std::string name)
    : graph_(g), executor_(ex), name_(std::move(name)) {
  for (const Value& v : g.values) {
    if (v.kind == Value::Kind::Tensor && v.tensor.device.is_cuda()) {
      device_ = v.tensor.device.index() < 0 ? 0 : v.tensor.device.index();
      break;
    }
  }
}

CudaGraphs::~CudaGraphs() {
  // Replays may still run on the GPU: their static buffers go back to the allocator after them.
  try {
    if (!graphs_.empty()) rc::synchronize(device_);
  } catch (...) {  // a failed device: nothing left to wait for
  }
}

int CudaGraphs::captured() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int>(graphs_.size());
}

std::unique_ptr<CudaGraphs::Captured> CudaGraphs::capture(const std::vector<IValue>& args,
                                                          const Scratch& s) {
  auto c = std::make_unique<Captured>();
  c->stream = rc::Stream::create(device_);
  // The arguments' data is ready before their copies are made on the graph's stream.
  rc::current_stream(device_).synchronize();
  rc::StreamGuard on(c->stream);
  std::vector<IValue> static_args = args;
  c->inputs.resize(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].is_tensor() || !args[i].to_tensor().defined()) continue;
    c->inputs[i] = args[i].to_tensor().clone();
    static_args[i] = IValue(c->inputs[i]);
  }
  c->stream.synchronize();
  c->graph = rc::Graph::capture(
      c->stream, [&] { c->outputs = executor_.run(static_args, s); }, "the CUDA graph of " + name_);
  c->done = std::make_unique<rc::Event>(device_, false);
  for (const Tensor& t : graph_.captured) {
    if (host_number(t)) c->numbers.emplace_back(t, bytes_of(t));
  }
  return c;
}

std::optional<std::vector<IValue>> CudaGraphs::run(const std::vector<IValue>& args,
                                                   const Scratch& s) {
  std::unique_lock<std::mutex> lock(mutex_);
  const std::vector<int64_t>& key = s.symbols;
  auto it = graphs_.find(key);
  if (it == graphs_.end()) {
    if (refused_.count(key) || calls_[key]++ == 0) return std::nullopt;  // the first call warms
    try {
      it = graphs_.emplace(key, capture(args, s)).first;
      log("cuda_graphs", name_ + ": captured a CUDA graph for these sizes");
    } catch (const Error& e) {
      refused_[key] = e.message();
      log("cuda_graphs",
          name_ + ": not replayed from a CUDA graph for these sizes: " + e.message());
      return std::nullopt;
    }
  }
  for (const auto& [t, bytes] : it->second->numbers) {
    if (bytes_of(t) == bytes) continue;
    // A closed-over number changed since the capture (the graph holds the old one): this size
    // is captured again, once the last replay no longer uses the old graph's buffers.
    log("cuda_graphs", name_ + ": a closed-over number changed: the CUDA graph is captured again");
    if (it->second->replayed) it->second->done->synchronize();
    try {
      it->second = capture(args, s);
    } catch (const Error& e) {
      graphs_.erase(it);
      refused_[key] = e.message();
      log("cuda_graphs",
          name_ + ": not replayed from a CUDA graph for these sizes: " + e.message());
      return std::nullopt;
    }
    break;
  }
  Captured& c = *it->second;
  const rc::Stream stream = rc::current_stream(device_);
  // Replays on another stream than the last one wait for it (they share the static buffers).
  if (c.replayed && c.last != stream.handle()) c.done->block(stream);
  for (size_t i = 0; i < args.size(); ++i) {
    if (c.inputs[i].defined()) c.inputs[i].copy_(args[i].to_tensor());
  }
  c.graph.launch(stream);
  std::vector<IValue> out;
  out.reserve(c.outputs.size());
  for (const IValue& o : c.outputs) {
    out.push_back(o.is_tensor() && o.to_tensor().defined() ? IValue(o.to_tensor().clone()) : o);
  }
  c.done->record(stream);
  c.last = stream.handle();
  c.replayed = true;
  return out;
}

}  // namespace tessera::compile_detail
