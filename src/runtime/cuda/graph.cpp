// CUDA graphs by stream capture (graph.h).
#include "runtime/cuda/graph.h"

#include <utility>

#include "tessera/error.h"

namespace tessera::runtime::cuda {

std::string graphs_unsupported() {
  std::string why;
  const Driver* d = driver(&why);
  if (!d) return why;
  if (!d->cuStreamBeginCapture || !d->cuStreamEndCapture || !d->cuGraphInstantiateWithFlags ||
      !d->cuGraphLaunch || !d->cuGraphExecDestroy || !d->cuGraphDestroy)
    return "the CUDA driver (" + d->path + ") has no stream capture or graph launch";
  return "";
}

namespace {
thread_local CUstream t_capturing = nullptr;  ///< the stream this thread captures, if any
}  // namespace

bool capturing(CUstream stream) {
  return t_capturing != nullptr && t_capturing == stream;
}

Graph Graph::capture(const Stream& stream, const std::function<void()>& body,
                     const std::string& what) {
  const std::string missing = graphs_unsupported();
  TS_CHECK(missing.empty(), RuntimeError) << what << ": cannot capture a CUDA graph: " << missing;
  const Driver& d = require_driver(what.c_str());
  set_device(stream.device());
  check(d.cuStreamBeginCapture(stream.handle(), kCaptureModeRelaxed), "cuStreamBeginCapture", what);
  Graph g;
  g.device_ = stream.device();
  g.what_ = what;
  t_capturing = stream.handle();
  try {
    body();
    t_capturing = nullptr;
  } catch (...) {
    t_capturing = nullptr;
    CUgraph partial = nullptr;
    d.cuStreamEndCapture(stream.handle(), &partial);  // ends the capture whatever happened
    if (partial) d.cuGraphDestroy(partial);
    throw;
  }
  check(d.cuStreamEndCapture(stream.handle(), &g.graph_), "cuStreamEndCapture",
        what +
            " (the capture was invalidated: something in it synchronized with the host or "
            "another stream)");
  check(d.cuGraphInstantiateWithFlags(&g.exec_, g.graph_, 0), "cuGraphInstantiateWithFlags", what);
  return g;
}

Graph::Graph(Graph&& o) noexcept {
  *this = std::move(o);
}

Graph& Graph::operator=(Graph&& o) noexcept {
  if (this != &o) {
    reset();
    device_ = o.device_;
    graph_ = std::exchange(o.graph_, nullptr);
    exec_ = std::exchange(o.exec_, nullptr);
    what_ = std::move(o.what_);
  }
  return *this;
}

Graph::~Graph() {
  reset();
}

void Graph::reset() {
  const Driver* d = driver();
  if (!d) return;
  if (exec_) d->cuGraphExecDestroy(exec_);
  if (graph_) d->cuGraphDestroy(graph_);
  exec_ = nullptr;
  graph_ = nullptr;
}

void Graph::launch(const Stream& stream) const {
  TS_INTERNAL_ASSERT(exec_) << "launch of an empty CUDA graph";
  set_device(stream.device());
  check(require_driver(what_.c_str()).cuGraphLaunch(exec_, stream.handle()), "cuGraphLaunch",
        what_);
  journal_launch(device_, stream.handle(), what_);
}

}  // namespace tessera::runtime::cuda
