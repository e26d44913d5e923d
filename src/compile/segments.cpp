// The compiled segments of a function that breaks (segmented mode; capture.cpp traces them): a
// segment's traced graph is keyed by its structure (inputs' geometry, every node and constant, the
// values it returns), so a call whose segment traces the same way runs the graph compiled for it.
#include <atomic>
#include <charconv>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "compile/capture.h"
#include "compile/executor.h"
#include "tessera/env.h"
#include "tl/jit.h"

namespace tessera::compile_detail {

using namespace tessera::compiler;

namespace {

// An integer and a comma (std::to_chars: the key is built on every segmented call, and
// snprintf's format parsing showed in its profile).
void append_int(std::string& k, int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  k.append(buf, static_cast<size_t>(r.ptr - buf));
  k += ',';
}

// A constant exactly (doubles by their bits: 0.1 and 0.1000000001 are other graphs).
void key_constant(std::string& k, const IValue& c) {
  append_int(k, static_cast<int>(c.tag()));
  auto bits = [&](double d) {
    int64_t b = 0;
    std::memcpy(&b, &d, sizeof b);
    append_int(k, b);
  };
  if (c.is_int()) {
    append_int(k, c.to_int());
  } else if (c.is_bool()) {
    append_int(k, c.to_bool());
  } else if (c.is_double()) {
    bits(c.to_double());
  } else if (c.is_double_list()) {
    for (double d : c.to_double_list()) bits(d);
  } else {
    k += c.repr();
  }
}

// What decides a segment's compiled graph, as text: equal keys trace to the same graph.
std::string segment_key(const Graph& g, bool fuse_builtins) {
  std::string k;
  k.reserve(64 * (g.nodes.size() + g.inputs.size() + 1));
  auto& ctx = g.env->ctx;
  // (The key is built on every segmented call: integers are appended as such, and only symbolic
  // expressions are printed.)
  auto num = [&](int64_t v) { append_int(k, v); };
  auto expr = [&](sym::ExprPtr e) {
    if (!e) {
      k += "-,";
    } else if (auto c = e->constant()) {
      num(*c);
    } else {
      k += ctx.str(e);
      k += ',';
    }
  };
  auto value = [&](int id) {
    k += '%';
    num(id);
    if (id < 0) return;
    const Value& v = g.values[static_cast<size_t>(id)];
    if (v.kind == Value::Kind::Int) {
      k += "int ";
      expr(v.expr);
      return;
    }
    const TensorInfo& t = v.tensor;
    num(static_cast<int64_t>(t.dtype));
    num(static_cast<int64_t>(t.device.type()));
    num(t.device.index());
    k += '[';
    for (auto* e : t.sizes) expr(e);
    k += "]/[";
    for (auto* e : t.strides) expr(e);
    k += "]+";
    expr(t.offset);
    k += '@';
    num(t.storage);
  };
  k += fuse_builtins ? "F" : "U";
  for (const auto& sym : g.env->symbols) k += "|" + sym.source;  // (not their values)
  k += "\nin";
  for (int in : g.inputs) value(in);
  k += "\ncaptured";
  for (size_t c = 0; c < g.captured.size(); ++c) {
    num(static_cast<int64_t>(reinterpret_cast<uintptr_t>(g.captured[c].impl())));
    value(g.captured_values[c]);
  }
  for (const Node& n : g.nodes) {
    k += '\n';
    num(static_cast<int64_t>(n.kind));
    if (n.kind == Node::Kind::Kernel) {
      k += n.kernel->name();
      num(static_cast<int64_t>(reinterpret_cast<uintptr_t>(n.kernel)));
      num(static_cast<int64_t>(reinterpret_cast<uintptr_t>(n.tuned.get())));
      for (const auto& v : n.variants) {
        for (auto* e : v.grid) expr(e);
      }
      for (auto* e : n.grid) expr(e);
    } else {
      k += n.op.name();
    }
    k += '(';
    for (const Arg& a : n.args) {
      num(static_cast<int64_t>(a.kind) * 100 + static_cast<int64_t>(a.role) * 10 +
          static_cast<int64_t>(a.option));
      k += a.name;
      k += '=';
      switch (a.kind) {
        case Arg::Kind::Value:
          num(a.value);
          break;
        case Arg::Kind::ValueList:
          for (int v : a.values) num(v);
          break;
        case Arg::Kind::Sym:
          expr(a.expr);
          break;
        case Arg::Kind::SymList:
          for (auto* e : a.exprs) expr(e);
          break;
        case Arg::Kind::Constant:
          key_constant(k, a.constant);
          break;
      }
      k += a.written ? "!;" : ";";
    }
    k += ")->";
    for (int o : n.outputs) value(o);
    for (const IValue& c : n.constant_outputs) key_constant(k, c);
    k += " w";
    for (int w : n.writes) num(w);
  }
  k += "\nout";
  for (int o : g.outputs) num(o);
  return k;
}

// Whether the replay must keep built-in ops as called (autograd records them): grad mode on and a
// tensor that requires grad among the inputs or closed-over tensors.
bool records_autograd(const Graph& g, const std::vector<IValue>& inputs) {
  if (!grad_enabled()) return false;
  for (const IValue& v : inputs) {
    if (v.is_tensor() && v.to_tensor().defined() && v.to_tensor().requires_grad()) return true;
  }
  for (const Tensor& t : g.captured) {
    if (t.requires_grad()) return true;
  }
  return false;
}

// The first line where two graph listings differ (a recompile's explanation).
std::string first_difference(const std::string& was, const std::string& now) {
  std::istringstream a(was), b(now);
  std::string la, lb;
  while (true) {
    const bool ha = static_cast<bool>(std::getline(a, la));
    const bool hb = static_cast<bool>(std::getline(b, lb));
    if (!ha && !hb) return "the values it returns changed";
    if (!ha || !hb || la != lb) {
      auto trim = [](std::string s) {
        const size_t p = s.find_first_not_of(' ');
        return p == std::string::npos ? s : s.substr(p);
      };
      return "`" + trim(ha ? la : std::string("(nothing)")) + "` is now `" +
             trim(hb ? lb : std::string("(nothing)")) + "`";
    }
  }
}

struct Segment {
  std::unique_ptr<Graph> graph;
  Guards guards;
  std::unique_ptr<Executor> executor;

  // This call's sizes from its symbols' values (the trace's hints); false when a guard of the
  // graph fails for them (a size the graph was specialized away from), explained in `why`.
  bool sizes(const std::vector<int64_t>& symbols, Scratch& s, std::string* why = nullptr) const {
    s.symbols = symbols;
    if (!guards.evaluate(s)) {
      if (why) *why = "a size expression overflows";
      return false;
    }
    for (size_t k = 0; k < guards.num_guards(); ++k) {
      if (s.values[k] != 0) continue;
      if (why) *why = guards.describe_guard(k);
      return false;
    }
    return true;
  }
  std::vector<IValue> run(const std::vector<IValue>& inputs, const Scratch& s) const {
    return executor->run(inputs, s);
  }
};

}  // namespace

struct SegmentCache::Impl {
  std::string name;
  bool fuse = true;
  bool plan_memory = true;
  int limit = 9;
  mutable std::mutex mu;
  /** Per traced structure, its graphs (more than one where guards on sizes tell them apart). */
  std::unordered_map<std::string, std::vector<std::unique_ptr<Segment>>> by_key;
  std::vector<const Segment*> order;
  std::map<size_t, int> per_site;             ///< graphs per segment position
  std::map<size_t, std::string> last_traced;  ///< per position: the newest traced listing
  std::atomic<bool> exhausted{false};
};

SegmentCache::SegmentCache(std::string name, bool fuse, bool plan_memory, int limit)
    : impl_(new Impl) {
  impl_->name = std::move(name);
  impl_->fuse = fuse;
  impl_->plan_memory = plan_memory;
  impl_->limit = limit;
}

SegmentCache::~SegmentCache() = default;

std::vector<IValue> SegmentCache::run(std::unique_ptr<Graph> traced, size_t site,
                                      const std::vector<IValue>& inputs,
                                      const std::string& ends_at) {
  Impl& c = *impl_;
  const bool fuse_builtins = !records_autograd(*traced, inputs);
  std::string key = segment_key(*traced, fuse_builtins);
  const std::vector<int64_t> symbols = traced->env->hints();
  Scratch s;
  std::unique_lock<std::mutex> lock(c.mu);
  auto& same = c.by_key[key];
  for (const auto& seg : same) {
    if (!seg->sizes(symbols, s)) continue;
    lock.unlock();
    return seg->run(inputs, s);
  }
  const std::string label = "segment " + std::to_string(site + 1) + ", to " + ends_at;
  traced->name = c.name + " [" + label + "]";
  const std::string listing = traced->str();
  int& graphs = c.per_site[site];
  if (graphs > 0 && knobs().log_enabled("recompiles")) {
    std::string why;
    if (same.empty()) {
      why = first_difference(c.last_traced[site], listing);
    } else {
      same.back()->sizes(symbols, s, &why);
    }
    log("recompiles", c.name + " " + label + ": a new graph (" + why + ")");
  }
  c.last_traced[site] = listing;
  auto seg = std::make_unique<Segment>();
  seg->graph = std::move(traced);
  if (graphs >= c.limit) {
    // Past the limit the segment runs as traced (no new kernels to build), and the function
    // runs eagerly from its next call.
    if (!c.exhausted.exchange(true)) {
      warn_once("tessera::compile: " + c.name + " compiled " + std::to_string(graphs) +
                " graphs for " + label + " (recompile_limit); running it eagerly from now on");
    }
    lock.unlock();
    seg->graph->verify();
    seg->guards.finish(*seg->graph);
    seg->executor = std::make_unique<Executor>(*seg->graph, seg->guards);
    TS_INTERNAL_ASSERT(seg->sizes(symbols, s)) << "a traced segment fails its own guards";
    return seg->run(inputs, s);
  }
  ++graphs;
  // (A segment autograd records as it replays keeps its ops as called and its own allocations.)
  optimize_graph(*seg->graph, c.fuse, fuse_builtins, c.plan_memory && fuse_builtins);
  seg->guards.finish(*seg->graph);
  seg->executor = std::make_unique<Executor>(*seg->graph, seg->guards);
  if (knobs().log_enabled("graph")) log("graph", seg->graph->str());
  TS_INTERNAL_ASSERT(seg->sizes(symbols, s)) << "a compiled segment fails its own guards";
  const Segment& kept = *same.emplace_back(std::move(seg));
  c.order.push_back(&kept);
  lock.unlock();
  return kept.run(inputs, s);
}

bool SegmentCache::exhausted() const {
  return impl_->exhausted.load(std::memory_order_acquire);
}

std::vector<CompiledGraph> SegmentCache::graphs() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<CompiledGraph> all;
  for (const Segment* s : impl_->order) all.push_back(s->graph->data());
  return all;
}

size_t SegmentCache::size() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->order.size();
}

std::string SegmentCache::last_graph() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->order.empty() ? std::string() : impl_->order.back()->graph->str();
}

}  // namespace tessera::compile_detail
