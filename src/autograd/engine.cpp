// The backward engine: runs the graph's nodes from the outputs towards the leaves, one at a time
// on the calling thread, later-created nodes first, summing the gradients that meet at a node.
#include <algorithm>
#include <functional>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "autograd/internal.h"
#include "tessera/ops.h"

namespace tessera::autograd {
namespace {

struct Capture {
  Node* node;
  uint32_t slot;
  size_t index;  // into the result of grad()
};

struct Task {
  bool keep_graph = false;
  bool create_graph = false;
  bool accumulate = true;  // backward(): run the leaf accumulators; grad(): capture instead
  std::vector<Capture> captures;
  std::vector<Tensor> captured;
};

struct NodeState {
  int deps = 0;
  std::vector<Tensor> buffer;
  bool needed = true;
};

Tensor add_grads(const Tensor& a, const Tensor& b) {
  if (!a.defined()) return b;
  if (!b.defined()) return a;
  return a + b;
}

void execute(const std::vector<Edge>& roots, const std::vector<Tensor>& root_grads, Task& task) {
  std::unordered_map<Node*, NodeState> state;
  std::unordered_map<Node*, std::shared_ptr<Node>> owners;  // keeps nodes alive while running
  // Dependencies: how many edges reach each node from the roots.
  std::vector<Node*> stack;
  for (const Edge& r : roots) {
    if (!r.valid()) continue;
    if (owners.emplace(r.fn.get(), r.fn).second) stack.push_back(r.fn.get());
    state[r.fn.get()];
  }
  std::vector<Node*> order;  // discovery order, for the needed-pass below
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    order.push_back(n);
    for (const Edge& e : n->next_edges()) {
      if (!e.valid()) continue;
      ++state[e.fn.get()].deps;
      if (owners.emplace(e.fn.get(), e.fn).second) stack.push_back(e.fn.get());
    }
  }
  // grad(): only nodes on a path to a captured gradient run.
  if (!task.accumulate) {
    std::unordered_set<Node*> targets;
    for (const Capture& c : task.captures) targets.insert(c.node);
    std::unordered_map<Node*, bool> memo;
    std::function<bool(Node*)> needed = [&](Node* n) -> bool {
      if (auto it = memo.find(n); it != memo.end()) return it->second;
      memo[n] = false;  // cycles cannot happen; this guards the recursion anyway
      bool r = false;
      for (const Edge& e : n->next_edges()) {
        if (e.valid() && (targets.count(e.fn.get()) || needed(e.fn.get()))) r = true;
      }
      return memo[n] = r;
    };
    for (Node* n : order) state[n].needed = needed(n);
  }
  for (auto& [n, s] : state) s.buffer.resize(std::max<size_t>(n->output_meta().size(), 1));

  auto deliver = [&](Node* n, uint32_t slot, Tensor g) {
    NodeState& s = state[n];
    if (slot >= s.buffer.size()) s.buffer.resize(slot + 1);
    const auto& metas = n->output_meta();
    if (g.defined() && slot < metas.size() && metas[slot].defined &&
        g.dtype() != metas[slot].dtype && is_floating_point(metas[slot].dtype)) {
      g = g.to(metas[slot].dtype);
    }
    s.buffer[slot] = add_grads(s.buffer[slot], g);
  };
  for (size_t i = 0; i < roots.size(); ++i) {
    if (roots[i].valid()) deliver(roots[i].fn.get(), roots[i].input_nr, root_grads[i]);
  }

  auto later_first = [](Node* a, Node* b) { return a->sequence_nr() < b->sequence_nr(); };
  std::priority_queue<Node*, std::vector<Node*>, decltype(later_first)> ready(later_first);
  for (auto& [n, s] : state) {
    if (s.deps == 0) ready.push(n);
  }
  BackwardScope scope;
  GradModeGuard grad_mode(task.create_graph);
  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    NodeState& s = state[n];
    std::vector<Tensor> grads = std::move(s.buffer);
    for (const Capture& c : task.captures) {
      if (c.node == n && c.slot < grads.size())
        task.captured[c.index] = add_grads(task.captured[c.index], grads[c.slot]);
    }
    const bool is_leaf_acc = dynamic_cast<AccumulateGrad*>(n) != nullptr;
    const bool run =
        s.needed && !(is_leaf_acc && !task.accumulate) &&
        std::any_of(grads.begin(), grads.end(), [](const Tensor& g) { return g.defined(); });
    std::vector<Tensor> outs;
    if (run) {
      outs = n->apply(std::move(grads));
      TS_INTERNAL_ASSERT(outs.size() == n->next_edges().size() || outs.empty())
          << n->name() << " returned " << outs.size() << " gradients for " << n->next_edges().size()
          << " edges";
      if (!task.keep_graph) n->release_variables();
    }
    const auto& edges = n->next_edges();
    for (size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (!e.valid()) continue;
      if (i < outs.size() && outs[i].defined()) deliver(e.fn.get(), e.input_nr, std::move(outs[i]));
      if (--state[e.fn.get()].deps == 0) ready.push(e.fn.get());
    }
  }
}

Tensor default_grad(const Tensor& t, size_t i) {
  TS_CHECK(t.numel() == 1, RuntimeError)
      << "a gradient can be created implicitly only for single-element outputs; output " << i
      << " has shape " << t.sizes() << ": pass its gradient explicitly";
  return ones_like(t);
}

void check_grad_arg(const Tensor& out, const Tensor& g, size_t i) {
  TS_CHECK(same_sizes(g.sizes(), out.sizes()), ValueError)
      << "the gradient for output " << i << " has shape " << g.sizes() << ", the output has shape "
      << out.sizes();
}

std::vector<Edge> root_edges(const std::vector<Tensor>& tensors, const char* what) {
  std::vector<Edge> roots;
  for (size_t i = 0; i < tensors.size(); ++i) {
    TS_CHECK(tensors[i].defined(), ValueError) << what << ": output " << i << " is undefined";
    Edge e = gradient_edge(tensors[i]);
    TS_CHECK(e.valid(), RuntimeError)
        << what << ": output " << i
        << " does not require grad and has no grad_fn (nothing to differentiate)";
    roots.push_back(std::move(e));
  }
  return roots;
}

std::vector<Tensor> root_grads(const std::vector<Tensor>& tensors,
                               const std::vector<Tensor>& grads) {
  TS_CHECK(grads.empty() || grads.size() == tensors.size(), ValueError)
      << "got " << grads.size() << " gradients for " << tensors.size() << " outputs";
  std::vector<Tensor> out;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (grads.empty() || !grads[i].defined()) {
      out.push_back(default_grad(tensors[i], i));
    } else {
      check_grad_arg(tensors[i], grads[i], i);
      out.push_back(grads[i]);
    }
  }
  return out;
}

}  // namespace

void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors,
              bool retain_graph, bool create_graph, SourceLoc loc) {
  UserLocGuard g(loc);
  Task task;
  task.keep_graph = retain_graph || create_graph;
  task.create_graph = create_graph;
  const auto roots = root_edges(tensors, "backward");
  execute(roots, root_grads(tensors, grad_tensors), task);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph,
                         bool create_graph, bool allow_unused, SourceLoc loc) {
  UserLocGuard g(loc);
  Task task;
  task.keep_graph = retain_graph || create_graph;
  task.create_graph = create_graph;
  task.accumulate = false;
  task.captured.resize(inputs.size());
  std::vector<std::shared_ptr<Node>> keep;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Edge e = gradient_edge(inputs[i]);
    TS_CHECK(e.valid(), RuntimeError) << "grad: input " << i << " does not require grad";
    task.captures.push_back(Capture{e.fn.get(), e.input_nr, i});
    keep.push_back(e.fn);
  }
  const auto roots = root_edges(outputs, "grad");
  execute(roots, root_grads(outputs, grad_outputs), task);
  for (size_t i = 0; i < inputs.size(); ++i) {
    TS_CHECK(task.captured[i].defined() || allow_unused, RuntimeError)
        << "grad: input " << i
        << " was not used to compute the outputs (pass allow_unused=true to get an "
        << "undefined gradient for it)";
  }
  return task.captured;
}

}  // namespace tessera::autograd
