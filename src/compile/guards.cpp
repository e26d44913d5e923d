#include "compile/guards.h"

#include <algorithm>
#include <optional>
#include <sstream>

namespace tessera::compile_detail {

using namespace tessera::compiler;

namespace {}  // namespace

std::string leaf_name(size_t i) {
  return "arg" + std::to_string(i);
}

void Guards::finish(const Graph& g) {
  graph_ = &g;
  std::vector<sym::ExprPtr> roots;
  for (const auto& gd : g.env->guards) roots.push_back(gd.condition);
  num_guards_ = roots.size();
  auto need = [&](sym::ExprPtr e) {
    if (!e || e->constant() || slot_.count(e)) return;
    slot_[e] = roots.size();
    roots.push_back(e);
  };
  for (const Node& n : g.nodes) {
    if (n.dead) continue;
    for (const Arg& a : n.args) {
      if (a.kind == Arg::Kind::Sym) need(a.expr);
      for (auto* e : a.exprs) need(e);
    }
    for (auto* e : n.grid) need(e);
    need(n.elide_when);
    need(n.arena_offset);
    for (const auto& v : n.variants) {
      for (auto* e : v.grid) need(e);
    }
  }
  for (const auto& a : g.arenas) need(a.bytes);
  program_ = std::make_unique<sym::Program>(g.env->ctx, roots);
}

std::string Guards::explain_constant(size_t i, const IValue& got) const {
  std::ostringstream os;
  os << leaf_name(i) << " == " << leaves[i].constant << " failed (got " << got << ")";
  return os.str();
}

std::string Guards::explain_guard(size_t k) const {
  const auto& gd = graph_->env->guards[k];
  std::ostringstream os;
  os << graph_->env->ctx.str(gd.condition) << " failed (" << gd.why;
  if (gd.loc.known())
    os << (gd.why.find("after the call at") != std::string::npos ? " " : ", guard from ") << gd.loc;
  os << ")";
  return os.str();
}

// Why tensor leaf `i` fails its guard, or nullopt when it passes (the slow path of `match`, which
// also binds the leaf's symbols).
std::optional<std::string> Guards::explain_leaf(size_t i, const Tensor& t, Scratch& s) const {
  const LeafGuard& g = leaves[i];
  const TensorImpl* impl = t.impl();
  auto fail = [](std::string msg) { return std::optional<std::string>(std::move(msg)); };
  if (t.dtype() != g.dtype) {
    return fail(leaf_name(i) + ".dtype == " + dtype_name(g.dtype) + " failed (got " +
                dtype_name(t.dtype()) + ")");
  }
  if (!(t.device() == g.device))
    return fail(leaf_name(i) + ".device == " + g.device.str() + " failed");
  if (impl->dim() != g.dim) {
    return fail(leaf_name(i) + ".dim() == " + std::to_string(g.dim) + " failed (got " +
                std::to_string(impl->dim()) + ")");
  }
  if (t.requires_grad() != g.requires_grad) {
    return fail(leaf_name(i) + ".requires_grad == " + (g.requires_grad ? "true" : "false") +
                " failed");
  }
  if (impl->has_symbolic_shape() || !impl->has_data())
    return fail(leaf_name(i) + " has data and plain sizes");
  const auto sizes = impl->int_sizes();
  for (int64_t d = 0; d < g.dim; ++d) {
    const int sym_index = g.size_symbol[static_cast<size_t>(d)];
    auto dn = [&] { return leaf_name(i) + ".size(" + std::to_string(d) + ")"; };
    if (sym_index < 0) {
      if (sizes[d] != g.sizes[static_cast<size_t>(d)]) {
        return fail(dn() + " == " + std::to_string(g.sizes[static_cast<size_t>(d)]) +
                    " failed (got " + std::to_string(sizes[d]) + ")");
      }
      continue;
    }
    if (sizes[d] < 2)
      return fail(dn() + " >= 2 failed (got " + std::to_string(sizes[d]) +
                  "; sizes 0 and 1 are specialized)");
    const size_t s_idx = static_cast<size_t>(sym_index);
    if (s.symbols[s_idx] < 0) {
      s.symbols[s_idx] = sizes[d];
    } else if (s.symbols[s_idx] != sizes[d]) {
      return fail(dn() + " == " + graph_->env->symbols[s_idx].source + " failed (got " +
                  std::to_string(sizes[d]) + " and " + std::to_string(s.symbols[s_idx]) + ")");
    }
  }
  if (g.contiguous) {
    if (!impl->is_contiguous()) return fail(leaf_name(i) + " is contiguous");
  } else {
    const auto strides = impl->int_strides();
    for (int64_t d = 0; d < g.dim; ++d) {
      if (strides[d] != g.strides[static_cast<size_t>(d)]) {
        return fail(leaf_name(i) + ".stride(" + std::to_string(d) +
                    ") == " + std::to_string(g.strides[static_cast<size_t>(d)]) + " failed (got " +
                    std::to_string(strides[d]) + ")");
      }
    }
  }
  if (impl->int_offset() != g.offset) {
    return fail(leaf_name(i) + ".storage_offset() == " + std::to_string(g.offset) +
                " failed (got " + std::to_string(impl->int_offset()) + ")");
  }
  return std::nullopt;
}

}  // namespace tessera::compile_detail
