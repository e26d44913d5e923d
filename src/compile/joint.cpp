#include "compile/joint.h"

#include <algorithm>
#include <set>

#include "autograd/internal.h"

namespace tessera::compile_detail {

using namespace tessera::compiler;

namespace {

// The values a node reads or writes.
template <class F>
void for_each_value(const Node& n, F&& f) {
  for (const Arg& a : n.args) {
    if (a.kind == Arg::Kind::Value) f(a.value);
    if (a.kind == Arg::Kind::ValueList) {
      for (int v : a.values) f(v);
    }
  }
  for (int w : n.writes) f(w);
}

// The forward values (defined before the backward's first node) that the live backward nodes
// and results read, in value order.
std::vector<int> forward_reads(const Graph& bw, const std::set<int>& own) {
  std::set<int> read;
  auto take = [&](int v) {
    if (v >= 0 && bw.values[static_cast<size_t>(v)].producer < 0 && !own.count(v)) read.insert(v);
  };
  for (const Node& n : bw.nodes) {
    if (!n.dead) for_each_value(n, take);
  }
  for (int o : bw.outputs) take(o);
  return {read.begin(), read.end()};
}

// ---- recomputation -----------------------------------------------------------------------------

// Forward nodes the backward may run again instead of reading their result: built-in pointwise
// operators (not random) and the row operators, pure, one result.
bool recomputable(const Node& n) {
  if (n.dead || n.kind != Node::Kind::Op || !n.writes.empty() || n.outputs.size() != 1 ||
      n.outputs[0] < 0)
    return false;
  const std::string& name = n.op.name();
  if (name == "aten::layer_norm" || name == "aten::rms_norm" || name == "aten::softmax.int" ||
      name == "aten::log_softmax.int")
    return true;
  return n.op.has_tag(kTagPointwise) && n.op.has_tag(kTagBuiltin) && !n.op.has_tag(kTagRandom) &&
         !n.op.has_tag(kTagInplace);
}

// Whether `n` can take v's computation into itself when it reads v: a pointwise or row op (fusion
// puts both in one kernel), a kernel that loads v directly (a prologue), or a factory that reads
// only v's shape (`empty_like`); otherwise v must be in memory for it.
bool absorbs(const Node& n, int v) {
  if (recomputable(n)) return true;
  if (n.kind == Node::Kind::Op && n.op.has_tag(kTagFactory))
    return true;  // `empty_like(v)`: metadata
  if (n.kind != Node::Kind::Kernel) return false;
  for (const Arg& a : n.args) {
    if (a.kind == Arg::Kind::Value && a.value == v && (!a.direct_load || a.written)) return false;
  }
  return true;
}

// Whether a node of `nodes` reads v and cannot absorb it.
bool needs_in_memory(const std::vector<Node>& nodes, int v) {
  for (const Node& n : nodes) {
    if (n.dead) continue;
    bool reads = false;
    for_each_value(n, [&](int u) { reads = reads || u == v; });
    if (reads && !absorbs(n, v)) return true;
  }
  return false;
}

class Recompute {
 public:
  Recompute(const Graph& g, const Graph& bw, size_t first_backward)
      : g_(g), bw_(bw), first_(first_backward) {
    for (size_t i = 0; i < first_; ++i) {
      for (int w : g_.nodes[i].writes) written_.insert(g_.storage_of(w));
    }
    for (int in : g_.inputs) {
      if (in >= 0) free_.insert(in);
    }
    free_.insert(g_.captured_values.begin(), g_.captured_values.end());
  }

  /** Replaces saved values that are cheaper to recompute from other saved values and the inputs
   * (min-cut-like, greedily). Saving v costs reading it in the backward, and writing it in the
   * forward unless the forward has it in memory anyway (a result, a matmul's operand or result):
   * |v| or 2|v|. Recomputing costs reading what it needs that is not saved yet (|u| for an input,
   * which the caller holds anyway, or a value the forward has in memory anyway, such as the
   * matmul's result under a bias add; 2|u| for another forward value), plus writing and reading v
   * when the backward needs it in memory (a matmul's operand: the recomputation is a pass of its
   * own). Returns the forward nodes to run first in the backward, in order; `saved` becomes what
   * the backward reads instead. */
  std::vector<size_t> apply(std::vector<int>& saved) {
    std::set<int> s(saved.begin(), saved.end());
    std::set<size_t> chosen;
    for (bool changed = true; changed;) {
      changed = false;
      for (int v : std::vector<int>(s.begin(), s.end())) {
        std::set<size_t> nodes;
        std::set<int> leaves;
        if (free_.count(v) || !plan(v, s, nodes, leaves, 0)) continue;
        const double size = static_cast<double>(bytes(v));
        double cost = needs_in_memory(bw_.nodes, v) ? 2 * size : 0;
        for (int u : leaves)
          cost += static_cast<double>(bytes(u)) * (free_.count(u) || in_memory(u) ? 1 : 2);
        if (cost >= (in_memory(v) ? 1 : 2) * size) continue;
        s.erase(v);
        s.insert(leaves.begin(), leaves.end());
        chosen.insert(nodes.begin(), nodes.end());
        changed = true;
      }
    }
    saved.assign(s.begin(), s.end());
    return {chosen.begin(), chosen.end()};
  }

 private:
  // The forward nodes that compute v from saved values, inputs or new leaves (`leaves`: what is
  // not saved yet); false when v cannot be recomputed within the depth limit.
  bool plan(int v, const std::set<int>& saved, std::set<size_t>& nodes, std::set<int>& leaves,
            int depth) const {
    const int p = g_.values[static_cast<size_t>(v)].producer;
    if (p < 0 || static_cast<size_t>(p) >= first_ || depth > kMaxDepth || nodes.size() >= kMaxNodes)
      return false;
    const Node& n = g_.nodes[static_cast<size_t>(p)];
    if (!recomputable(n)) return false;
    nodes.insert(static_cast<size_t>(p));
    for (const Arg& a : n.args) {
      if (a.kind == Arg::Kind::ValueList) return false;
      if (a.kind != Arg::Kind::Value || a.value < 0) continue;
      const int u = a.value;
      // What a forward node writes may have changed after v was computed.
      if (written_.count(g_.storage_of(u))) return false;
      if (saved.count(u) || free_.count(u)) {
        if (!saved.count(u)) leaves.insert(u);
        continue;
      }
      std::set<size_t> sub_nodes = nodes;
      std::set<int> sub_leaves = leaves;
      if (plan(u, saved, sub_nodes, sub_leaves, depth + 1)) {
        nodes = std::move(sub_nodes);
        leaves = std::move(sub_leaves);
      } else {
        leaves.insert(u);  // saved instead
      }
    }
    return true;
  }

  // Whether the forward stores v whatever is saved: a result, a value a forward node needs in
  // memory (a matmul's operand), or one made by a node fusion cannot inline into its readers (a
  // matmul's result). Saving such a value costs only the backward's read.
  bool in_memory(int v) const {
    if (std::find(g_.outputs.begin(), g_.outputs.end(), v) != g_.outputs.end()) return true;
    const int p = g_.values[static_cast<size_t>(v)].producer;
    if (p >= 0 && static_cast<size_t>(p) < first_ &&
        !recomputable(g_.nodes[static_cast<size_t>(p)]))
      return true;
    return needs_in_memory(g_.nodes, v);
  }

  int64_t bytes(int v) const {
    const TensorInfo& t = g_.values[static_cast<size_t>(v)].tensor;
    int64_t n = static_cast<int64_t>(itemsize(t.dtype));
    for (sym::ExprPtr d : t.sizes) n *= g_.env->hint(d);
    return n;
  }

  static constexpr int kMaxDepth = 8;
  static constexpr size_t kMaxNodes = 16;
  const Graph& g_;   ///< the forward (its nodes, its results as outputs)
  const Graph& bw_;  ///< the backward
  size_t first_;
  std::set<int> written_;  ///< storages forward nodes write
  std::set<int> free_;     ///< inputs and closed-over tensors
};

/** One call's backward: the compiled backward graph with this call's saved tensors and sizes. */
class CompiledFunctionBackward final : public autograd::Node {
 public:
  CompiledFunctionBackward(std::shared_ptr<const BackwardRunner> bw, std::vector<Tensor> saved,
                           std::vector<int64_t> symbols, std::string fn)
      : bw_(std::move(bw)),
        saved_(std::move(saved)),
        symbols_(std::move(symbols)),
        fn_(std::move(fn)) {
    for (const Tensor& t : saved_) versions_.push_back(t.version());
    // Closed-over tensors the backward reads (a weight in its input's gradient) are read when it
    // runs: an optimizer step in between would change them, as it would change a saved tensor.
    const auto& captured = bw_->graph().graph->captured;
    for (size_t c : bw_->captured_reads()) {
      closed_.push_back(captured[c]);
      versions_.push_back(captured[c].version());
    }
  }
  std::string name() const override { return "CompiledFunctionBackward"; }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    TS_CHECK(!grad_enabled(), NotImplementedError)
        << "[" << fn_
        << "] double backward (create_graph=true) through a compiled function is not "
           "supported: its backward is a compiled graph autograd cannot differentiate; call the "
           "function uncompiled, or under compile with grad disabled for the inner use";
    TS_CHECK(!released_, RuntimeError)
        << "[" << fn_
        << "] trying to run the backward through the compiled graph a second time (its saved "
           "tensors were freed): pass retain_graph=true to the first backward";
    for (size_t i = 0; i < saved_.size() + closed_.size(); ++i) {
      const Tensor& t = i < saved_.size() ? saved_[i] : closed_[i - saved_.size()];
      TS_CHECK(t.version() == versions_[i], RuntimeError)
          << "[" << fn_ << "] a tensor the compiled backward needs ("
          << (i < saved_.size() ? "saved tensor " + std::to_string(i)
                                : "a tensor the function closes over")
          << ") was modified by an in-place operation after the forward: it was at version "
          << versions_[i] << " and is now at version " << t.version()
          << "; clone it before modifying it, or modify it after the backward";
    }
    const BackwardGraph& g = bw_->graph();
    std::vector<IValue> in;
    in.reserve(saved_.size() + grads.size());
    for (const Tensor& t : saved_) in.emplace_back(t);
    for (size_t k = 0; k < grads.size(); ++k) {
      Tensor gk = std::move(grads[k]);
      // The graph was traced on dense gradients; a missing one is zeros.
      if (!gk.defined()) gk = output_meta()[k].zeros();
      if (!gk.is_contiguous()) gk = gk.contiguous();
      in.emplace_back(std::move(gk));
    }
    Scratch s;
    s.symbols = symbols_;
    TS_CHECK(g.guards.evaluate(s), RuntimeError)
        << "[" << fn_ << "] a size of the compiled backward overflows";
    std::vector<IValue> out = bw_->executor().run(in, s);
    std::vector<Tensor> result;
    result.reserve(out.size());
    for (IValue& o : out) result.push_back(o.is_tensor() ? o.to_tensor() : Tensor());
    return result;
  }

  void release_variables() override {
    saved_.clear();
    closed_.clear();
    released_ = true;
  }

 private:
  std::shared_ptr<const BackwardRunner> bw_;
  std::vector<Tensor> saved_;
  std::vector<Tensor> closed_;  ///< closed-over tensors the backward reads (version-checked)
  std::vector<uint32_t> versions_;
  std::vector<int64_t> symbols_;
  std::string fn_;
  bool released_ = false;
};

}  // namespace

BackwardRunner::BackwardRunner(std::shared_ptr<const BackwardGraph> g)
    : graph_(std::move(g)), exec_(*graph_->graph, graph_->guards) {
  const Graph& bw = *graph_->graph;
  std::set<int> read;
  for (const Node& n : bw.nodes) {
    if (!n.dead) for_each_value(n, [&](int v) { read.insert(v); });
  }
  for (size_t c = 0; c < bw.captured_values.size(); ++c) {
    if (read.count(bw.captured_values[c])) captured_reads_.push_back(c);
  }
}

std::unique_ptr<Graph> split_backward(Graph& g, size_t first_backward,
                                      const std::vector<int>& seeds,
                                      const std::vector<int>& grads) {
  const int first = static_cast<int>(first_backward);
  auto bw = std::make_unique<Graph>();
  bw->name = g.name + " (backward)";
  bw->env = g.env;
  bw->values = g.values;
  bw->captured = g.captured;
  bw->captured_values = g.captured_values;
  bw->nodes.assign(std::make_move_iterator(g.nodes.begin() + first),
                   std::make_move_iterator(g.nodes.end()));
  g.nodes.resize(first_backward);
  for (Value& v : bw->values) v.producer = v.producer >= first ? v.producer - first : -1;
  for (Value& v : g.values) {
    if (v.producer >= first) v.producer = -1;  // the backward's: not used by the forward
  }
  std::set<int> own(seeds.begin(), seeds.end());
  own.insert(g.captured_values.begin(), g.captured_values.end());
  bw->outputs = grads;
  bw->constant_outputs.assign(grads.size(), IValue());
  // Dead code first (with every forward value it reads as an input, so that a write to one
  // stays observable), then only what the live nodes read is saved.
  auto with_seeds = [&](std::vector<int> saved) {
    saved.insert(saved.end(), seeds.begin(), seeds.end());
    return saved;
  };
  bw->inputs = with_seeds(forward_reads(*bw, own));
  bw->eliminate_dead_code();
  std::vector<int> saved = forward_reads(*bw, own);
  // Cheap forward values the backward computes again rather than reads (then the forward need
  // not store them): copies of their nodes run first.
  const std::vector<size_t> again = Recompute(g, *bw, first_backward).apply(saved);
  if (!again.empty()) {
    std::vector<Node> copies;
    for (size_t i : again) copies.push_back(g.nodes[i]);
    bw->insert_nodes(0, std::move(copies));
    for (size_t k = 0; k < again.size(); ++k)
      bw->values[static_cast<size_t>(g.nodes[again[k]].outputs[0])].producer = static_cast<int>(k);
    saved = forward_reads(*bw, own);
  }
  bw->inputs = with_seeds(saved);
  for (int v : saved) {
    g.outputs.push_back(v);
    g.constant_outputs.emplace_back();
  }
  return bw;
}

std::vector<IValue> run_with_backward(const std::shared_ptr<const BackwardRunner>& bw,
                                      const Executor& forward, const Graph& g,
                                      const std::vector<IValue>& args, const Scratch& s,
                                      const std::string& name) {
  std::vector<IValue> results;
  {
    NoGradGuard no_grad;
    results = forward.run(args, s);
  }
  const BackwardGraph& b = bw->graph();
  std::vector<Tensor> saved;
  saved.reserve(results.size() - b.user_outputs);
  for (size_t i = b.user_outputs; i < results.size(); ++i) saved.push_back(results[i].to_tensor());
  results.resize(b.user_outputs);
  auto node = std::make_shared<CompiledFunctionBackward>(bw, std::move(saved), s.symbols, name);
  for (int t : b.grad_targets) {
    const Tensor& target =
        t >= 0 ? args[static_cast<size_t>(t)].to_tensor() : g.captured[static_cast<size_t>(-1 - t)];
    node->mutable_next_edges().push_back(autograd::gradient_edge(target));
    node->input_meta().push_back(autograd::TensorMeta::of(target));
  }
  for (size_t k = 0; k < b.diff_outputs.size(); ++k) {
    const Tensor& r = results[b.diff_outputs[k]].to_tensor();
    autograd::set_history(r, node, static_cast<uint32_t>(k));
    node->output_meta().push_back(autograd::TensorMeta::of(r));
  }
  return results;
}

}  // namespace tessera::compile_detail
